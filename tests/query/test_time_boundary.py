"""timeBoundary over hourly wikipedia segments, against min/max computed by DuckDB on raw rows."""

from __future__ import annotations

from typing import Any

import duckdb
import pytest

from harness.raw_segments import clip, wikipedia_rows, write_segments
from strata.engine import run_partials, run_to_json
from strata.engine.segment_input import SegmentInput
from strata.query import parse_query
from strata.query.errors import InvalidInput
from timeline import Interval, format_instant


@pytest.fixture(scope="module")
def segments(tmp_path_factory: pytest.TempPathFactory) -> list[SegmentInput]:
    return write_segments(wikipedia_rows(), tmp_path_factory.mktemp("tb_segments"))


def extremes(where: str = "TRUE") -> tuple[str, str]:
    conn = duckdb.connect()
    conn.register("raw", wikipedia_rows())
    row = conn.execute(
        f"SELECT min(epoch_ms(__time)), max(epoch_ms(__time)) FROM raw WHERE {where}"
    ).fetchone()
    assert row is not None
    return format_instant(row[0]), format_instant(row[1])


def tb(inputs: list[SegmentInput], **fields: Any) -> list[Any]:
    return run_to_json(parse_query({"queryType": "timeBoundary", "dataSource": "wiki", **fields}), inputs)


def test_both_bounds_default_to_eternity(segments: list[SegmentInput]) -> None:
    low, high = extremes()
    assert low == "2015-09-12T00:46:58.771Z" and high == "2015-09-12T23:59:59.200Z"  # published facts
    assert tb(segments) == [{"timestamp": low, "result": {"minTime": low, "maxTime": high}}]


def test_single_bounds(segments: list[SegmentInput]) -> None:
    low, high = extremes()
    assert tb(segments, bound="minTime") == [{"timestamp": low, "result": {"minTime": low}}]
    assert tb(segments, bound="maxTime") == [{"timestamp": high, "result": {"maxTime": high}}]


def test_filter_and_interval(segments: list[SegmentInput]) -> None:
    low, high = extremes(
        "channel = '#fr.wikipedia' AND __time >= '2015-09-12T03:00:00Z' AND __time < '2015-09-12T09:00:00Z'"
    )
    window = Interval.parse("2015-09-12T03:00:00Z/2015-09-12T09:00:00Z")
    got = tb(
        clip(segments, window),
        intervals=[str(window)],
        filter={"type": "selector", "dimension": "channel", "value": "#fr.wikipedia"},
    )
    assert got == [{"timestamp": low, "result": {"minTime": low, "maxTime": high}}]


def test_partials_merge_and_empty(segments: list[SegmentInput]) -> None:
    q = parse_query({"queryType": "timeBoundary", "dataSource": "wiki"})
    partials = [run_partials(q, segments[i : i + 4]) for i in range(0, len(segments), 4)]
    assert sum(p.num_rows for p in partials) == len(segments)  # one row per segment
    assert q.finalize(q.merge([q.merge(partials[:3]), q.merge(partials[3:])])) == run_to_json(q, segments)
    assert tb(segments, filter={"type": "selector", "dimension": "page", "value": "nope"}) == []
    assert tb([]) == []


def test_cache_key_and_errors() -> None:
    a = parse_query({"queryType": "timeBoundary", "dataSource": "wiki", "bound": "maxTime"})
    b = parse_query(
        {"queryType": "timeBoundary", "dataSource": "other", "bound": "maxTime", "intervals": ["2015/2016"]}
    )
    c = parse_query({"queryType": "timeBoundary", "dataSource": "wiki"})
    assert a.cache_key() == b.cache_key() != c.cache_key()
    with pytest.raises(InvalidInput):
        parse_query({"queryType": "timeBoundary", "dataSource": "wiki", "bound": "middle"})


def test_footer_statistics_give_each_segments_extremes(segments: list[SegmentInput]) -> None:
    from strata.engine.time_boundary import footer_time_span

    conn = duckdb.connect()
    for s in segments:
        want = conn.execute(f"SELECT min(epoch_ms(__time)), max(epoch_ms(__time)) FROM '{s.path}'").fetchone()
        assert footer_time_span(s.path) == want


def test_a_clipped_segment_is_scanned_not_answered_from_its_footer(segments: list[SegmentInput]) -> None:
    # half of each hourly segment: the footer's extremes may lie outside it
    halves = [
        h for s in segments for h in clip([s], Interval(s.interval.start, s.interval.start + 1_800_000))
    ]
    ends = " OR ".join(
        f"(epoch_ms(__time) >= {h.interval.start} AND epoch_ms(__time) < {h.interval.end})" for h in halves
    )
    low, high = extremes(ends)
    assert tb(halves) == [{"timestamp": low, "result": {"minTime": low, "maxTime": high}}]
