"""dataSourceMetadata over hourly wikipedia segments, against DuckDB's max over raw rows."""

from __future__ import annotations

import pytest

from harness.raw_segments import wikipedia_rows, write_segments
from strata.engine import run_partials, run_to_json
from strata.engine.segment_input import SegmentInput
from strata.query import parse_query
from tests.query.test_time_boundary import extremes


@pytest.fixture(scope="module")
def segments(tmp_path_factory: pytest.TempPathFactory) -> list[SegmentInput]:
    return write_segments(
        wikipedia_rows(), tmp_path_factory.mktemp("dsm_segments"), granularity_ms=6 * 3_600_000
    )


def test_datasource_metadata(segments: list[SegmentInput]) -> None:
    _, high = extremes()
    q = parse_query({"queryType": "dataSourceMetadata", "dataSource": "wiki"})
    assert run_to_json(q, segments) == [{"timestamp": high, "result": {"maxIngestedEventTime": high}}]
    partials = [run_partials(q, [s]) for s in segments]
    assert q.finalize(q.merge(partials)) == run_to_json(q, segments)
    assert run_to_json(q, []) == []
    assert parse_query(q.to_json()).to_json() == q.to_json()
