"""Answers joined from cached partials' remembered rows are the full merge's answer, byte for byte.

Per-segment partials computed by the real engine over hourly segments of the wikipedia sample; the
full path (merge, finalize, encode) is what the fragments must reproduce, and itself checked
against DuckDB over the raw rows in tests/query.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from broker_service.row_fragments import TOO_MANY_NEW, fragment_answer
from strata.engine import run_partials
from strata.query import parse_query
from strata.query.base import Query
from strata.query.errors import QueryError
from strata.server.json_response import encode_json
from tests.query.segment_fixtures import wikipedia_rows, write_segments

DAY = "2015-09-12/2015-09-13"
AGGS = [
    {"type": "count", "name": "rows"},
    {"type": "longSum", "name": "added", "fieldName": "added"},
    {"type": "doubleSum", "name": "deleted", "fieldName": "deleted"},
    {"type": "longMin", "name": "minDelta", "fieldName": "delta"},
    {"type": "doubleMax", "name": "maxAdded", "fieldName": "added"},
]
RATIO = {"type": "arithmetic", "name": "ratio", "fn": "/",
         "fields": [{"type": "fieldAccess", "fieldName": "deleted"}, {"type": "fieldAccess", "fieldName": "rows"}]}  # fmt: skip


@pytest.fixture(scope="module")
def partials_by(tmp_path_factory: pytest.TempPathFactory) -> Any:
    segments = write_segments(wikipedia_rows(), Path(tmp_path_factory.mktemp("fragments")))

    def partials(query: Query) -> list[pa.Table]:
        return [run_partials(query, [s]) for s in segments]  # one partial per segment, as cached

    return partials


def ts(**fields: Any) -> Query:
    return parse_query({"queryType": "timeseries", "dataSource": "wiki", "intervals": [DAY],
                        "aggregations": AGGS, **fields})  # fmt: skip


def full(query: Query, partials: list[pa.Table]) -> bytes:
    return encode_json(query.finalize(query.merge(partials)))


JOINED = {
    "hour": ts(granularity="hour"),
    "minute": ts(granularity="minute"),
    "fifteen minutes, post-aggregator": ts(granularity="fifteen_minute", postAggregations=[RATIO]),
    "descending, limit": ts(granularity="hour", descending=True, limit=5),
    "limit": ts(granularity="hour", limit=3),
    "time zone": ts(granularity={"type": "period", "period": "PT1H", "timeZone": "Europe/Berlin"}),
    "not finalized": ts(granularity="hour", context={"finalize": False}),
    "filtered": ts(
        granularity="hour", filter={"type": "selector", "dimension": "channel", "value": "#en.wikipedia"}
    ),
}
MERGED = {  # buckets spanning segments, one row overall, or a total: the full merge runs
    "day": ts(granularity="day"),
    "six hours": ts(granularity="six_hour"),
    "all": ts(granularity="all"),
    "half-hour zone": ts(granularity={"type": "period", "period": "PT1H", "timeZone": "Asia/Kolkata"}),
    "grand total": ts(granularity="hour", context={"grandTotal": True}),
}


@pytest.mark.parametrize("name", list(JOINED))
def test_joined_rows_are_the_merged_answer(partials_by: Any, name: str) -> None:
    query = JOINED[name]
    partials = partials_by(query)
    want = full(query, partials)
    assert fragment_answer(query, partials, 10**6) == want
    assert fragment_answer(query, partials, 10**6) == want  # remembered now
    assert fragment_answer(query, partials, 10**6, new_limit=0) == want  # nothing new to finalize


@pytest.mark.parametrize("name", list(MERGED))
def test_shapes_that_combine_rows_are_left_to_the_merge(partials_by: Any, name: str) -> None:
    query = MERGED[name]
    assert fragment_answer(query, partials_by(query), 10**6) is None


def test_a_changed_partial_is_finalized_alone(partials_by: Any) -> None:
    query = ts(granularity="hour")
    partials = partials_by(query)
    fragment_answer(query, partials, 10**6)
    fresh = [*partials[:-1], partials[-1].slice(0)]  # an equal partial, a new object
    assert fragment_answer(query, fresh, 10**6, new_limit=1) == full(query, fresh)
    others = partials_by(query)  # all new objects
    assert fragment_answer(query, others, 10**6, new_limit=1) is TOO_MANY_NEW


def test_limits_hold_as_in_the_merge(partials_by: Any) -> None:
    query = ts(granularity="minute")
    partials = partials_by(query)
    rows = len(query.finalize(query.merge(partials)))
    assert fragment_answer(query, partials, rows - 1) is None  # the merge then names the limit
    with pytest.raises(QueryError):
        fragment_answer(ts(granularity="none"), partials_by(ts(granularity="none")), 10**9)
