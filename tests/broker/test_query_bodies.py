"""Query bodies remembered by their bytes: a repeat is the same query, with its own id unless the
client named one; bad bodies fail every time. The oracle is a fresh parse of the same bytes."""

from __future__ import annotations

import uuid

import orjson
import pytest

from broker_service.query_bodies import ParsedBodies
from strata.query import parse_query
from strata.query.errors import BadJson, QueryError, ResourceLimitExceeded

BODY = {
    "queryType": "timeseries",
    "dataSource": "wiki",
    "intervals": ["2015-09-12/2015-09-13"],
    "granularity": {"type": "period", "period": "PT1H", "timeZone": "America/Los_Angeles"},
    "filter": {"type": "selector", "dimension": "channel", "value": "#en.wikipedia"},
    "aggregations": [{"type": "count", "name": "rows"}, {"type": "longSum", "name": "a", "fieldName": "added"}],
    "postAggregations": [
        {"type": "arithmetic", "name": "avg", "fn": "/",
         "fields": [{"type": "fieldAccess", "fieldName": "a"}, {"type": "fieldAccess", "fieldName": "rows"}]},
    ],
    "context": {"skipEmptyBuckets": True},
}  # fmt: skip


def without_id(obj: dict) -> dict:
    return {**obj, "context": {k: v for k, v in obj["context"].items() if k != "queryId"}}


def test_a_repeat_is_the_same_query_with_a_fresh_id_each_time() -> None:
    bodies = ParsedBodies()
    raw = orjson.dumps(BODY)
    first, second = bodies.parse(raw, 1 << 20), bodies.parse(raw, 1 << 20)
    fresh = parse_query(orjson.loads(raw))
    assert without_id(first.to_json()) == without_id(second.to_json()) == without_id(fresh.to_json())
    ids = {first.context.query_id, second.context.query_id, bodies.parse(raw, 1 << 20).context.query_id}
    assert len(ids) == 3 and all(uuid.UUID(i) for i in ids)
    assert "queryId" not in second.context.raw  # still "no id named", for what forwards the context


def test_a_named_id_is_kept_on_every_repeat() -> None:
    bodies = ParsedBodies()
    raw = orjson.dumps({**BODY, "context": {"queryId": "dash-1"}})
    assert [bodies.parse(raw, 1 << 20).context.query_id for _ in range(3)] == ["dash-1"] * 3


def test_equal_json_in_other_bytes_is_parsed_on_its_own() -> None:
    bodies = ParsedBodies()
    one = bodies.parse(orjson.dumps(BODY), 1 << 20)
    other = {**BODY, "intervals": ["2015-09-12/2015-09-14"]}
    two = bodies.parse(orjson.dumps(other), 1 << 20)
    assert str(two.segment_spec.intervals[0]) != str(one.segment_spec.intervals[0])


@pytest.mark.parametrize(
    ("raw", "error"),
    [
        (b"{not json", BadJson),
        (b'{"queryType":"timeseries","dataSource":"wiki"}', QueryError),
        (b"[" * 200 + b"]" * 200, BadJson),
    ],
)
def test_bad_bodies_fail_every_time(raw: bytes, error: type[Exception]) -> None:
    bodies = ParsedBodies()
    for _ in range(2):
        with pytest.raises(error):
            bodies.parse(raw, 1 << 20)


def test_the_size_limit_holds_for_a_remembered_body() -> None:
    bodies = ParsedBodies()
    raw = orjson.dumps(BODY)
    bodies.parse(raw, 1 << 20)
    with pytest.raises(ResourceLimitExceeded):
        bodies.parse(raw, len(raw) - 1)


def test_large_bodies_are_not_remembered() -> None:
    bodies = ParsedBodies(max_body_bytes=64)
    raw = orjson.dumps({**BODY, "context": {"queryId": "q"}})
    assert bodies.parse(raw, 1 << 20) is not bodies.parse(raw, 1 << 20)
    small = ParsedBodies()
    assert small.parse(raw, 1 << 20) is small.parse(raw, 1 << 20)
