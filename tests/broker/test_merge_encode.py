"""What a merge worker sends back (`merge_and_encode`: the answer's JSON written from Arrow)
against what a broker merging in its threads answers (`merge_and_finalize`: rows, then orjson)."""

from __future__ import annotations

from typing import Any

import pytest

from broker_service.merging import merge_and_encode, merge_and_finalize
from strata.engine import run_merged, run_partials
from strata.engine.segment_input import SegmentInput
from strata.query import parse_query
from strata.query.errors import ResourceLimitExceeded
from tests.query.segment_fixtures import wikipedia_rows, write_segments


@pytest.fixture(scope="module")
def segments(tmp_path_factory: pytest.TempPathFactory) -> list[SegmentInput]:
    return write_segments(wikipedia_rows(), tmp_path_factory.mktemp("merge_encode_wiki"))


QUERIES: dict[str, dict[str, Any]] = {
    "page x user": {"dimensions": ["page", "user"]},
    "by hour, limited": {"granularity": "hour", "dimensions": ["channel"],
                         "limitSpec": {"type": "default", "limit": 7, "columns": ["edits"]}},
    "array output": {"dimensions": [{"type": "default", "dimension": "channel", "outputName": "c",
                                     "outputType": "STRING"}], "context": {"resultAsArray": True}},
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(QUERIES))
def test_worker_bytes_are_the_threads_bytes(segments: list[SegmentInput], name: str) -> None:
    query = parse_query({
        "queryType": "groupBy", "dataSource": "wiki", "intervals": ["2015-09-12/2015-09-13"],
        "granularity": "all", "aggregations": [{"type": "count", "name": "edits"},
                                               {"type": "longSum", "name": "added", "fieldName": "added"}],
        **QUERIES[name],
    })  # fmt: skip
    per_segment = [run_partials(query, segments[i::2]) for i in range(2)]
    expected = merge_and_finalize(query, per_segment, 10**6)[1]
    assert merge_and_encode(query, per_segment, 10**6) == expected
    one_node = [run_merged(query, segments)]  # what one data node answers a broker caching nothing
    assert merge_and_encode(query, one_node, 10**6, True) == expected
    assert merge_and_finalize(query, one_node, 10**6, True)[1] == expected
    with pytest.raises(ResourceLimitExceeded):
        merge_and_encode(query, one_node, 2, True)
