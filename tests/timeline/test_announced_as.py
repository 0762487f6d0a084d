"""A replica's announcement told equal to the segment already held without parsing it: never
equal when a full parse would give a different announcement, equal when it is the same JSON."""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from strata.discovery import parse_batch
from timeline import DataSegment

BASE: dict[str, Any] = {
    "dataSource": "events_1", "interval": "2015-01-01T00:00:00.000Z/2015-01-01T01:00:00.000Z",
    "version": "2015-01-01T00:00:00.000Z", "loadSpec": {"type": "s3_zip", "key": "k"},
    "dimensions": "country,page", "metrics": "count,added",
    "shardSpec": {"type": "numbered", "partitionNum": 0, "partitions": 1}, "binaryVersion": 9,
    "size": 500_123, "numRows": 1_042, "minTime": 1_420_070_400_000, "maxTime": 1_420_073_999_999,
    "identifier": "events_1_2015-01-01T00:00:00.000Z_2015-01-01T01:00:00.000Z_2015-01-01T00:00:00.000Z",
}  # fmt: skip

CHANGES: dict[str, list[Any]] = {
    "dataSource": ["events_2", "events", 1, None],
    "interval": [
        "2015-01-01T00:00:00Z/2015-01-01T01:00:00Z", "2015-01-01T00:00:00.000Z/2015-01-01T02:00:00.000Z",
        "2014-12-31T24:00:00.000Z/2015-01-01T01:00:00.000Z", "2015-01-01T00:00:00.000+00:00/2015-01-01T01:00:00.000Z",
        "2015-01-01T00:00:00.000Z_2015-01-01T01:00:00.000Z", "x", 7,
    ],
    "version": ["2015-01-02T00:00:00.000Z", "", 3],
    "loadSpec": [{"type": "local", "path": "/p"}, None],
    "dimensions": ["country", ["country", "page"], "", None, "page,country"],
    "metrics": ["count", ["count", "added"], None],
    "shardSpec": [None, {"type": "none"}, {"type": "numbered", "partitionNum": 1, "partitions": 2},
                  {"type": "numbered", "partitionNum": 0, "partitions": 2}, {"type": "linear", "partitionNum": 0},
                  {"type": "numbered", "partitionNum": 0, "partitions": 1.0}],
    "binaryVersion": [None, 8, 9.0, "9", "x"],
    "size": [0, None, 500_124, 500_123.0, "500123", True],
    "numRows": [1_043, 1_042.0, True, None, "1042", 2**63],
    "minTime": [1_420_070_400_001, None, 1.5],
    "extraKey": [1, "x", None],
    "identifier": ["events_2_2015-01-01T00:00:00.000Z_2015-01-01T01:00:00.000Z_2015-01-01T00:00:00.000Z", 5],
}  # fmt: skip


@settings(max_examples=400, deadline=None)  # timing is not what it checks (a busy CI)
@given(st.lists(st.sampled_from(sorted(CHANGES)), max_size=3, unique=True), st.data())
def test_told_equal_only_when_a_full_parse_announces_the_same(keys: list[str], data: Any) -> None:
    held = DataSegment.from_json(BASE, compact=True)
    assert held.announced_as(BASE) and held.announced_as(orjson.loads(orjson.dumps(BASE)))
    item = dict(BASE)
    for key in keys:
        item[key] = data.draw(st.sampled_from(CHANGES[key]))
    if data.draw(st.booleans()) and keys:
        del item[keys[0]]
    try:
        oracle = DataSegment.from_json(item, compact=True)
    except (ValueError, TypeError, KeyError, AttributeError):
        oracle = None
    told = held.announced_as(item)
    if told:
        assert oracle is not None and oracle.same_announcement(held) and oracle.id == held.id
    # what a broker keeps from a batch: the held object when told so, else a fresh parse, equal
    # to the oracle either way
    out = parse_batch(orjson.dumps([item]), compact=True, held={held.id: held}.get)
    if oracle is None:
        assert out == []
    else:
        (got,) = out
        assert got.same_announcement(oracle) and got.id == oracle.id
        found = item.get("identifier") == held.id  # the id only says where to look
        assert (got is held) == (told and found)


def test_an_unchanged_replica_is_told_equal_and_plain_segments_never_are() -> None:
    held = DataSegment.from_json(BASE, compact=True)
    assert parse_batch(orjson.dumps([BASE, BASE]), compact=True, held={held.id: held}.get) == [held, held]
    assert all(s is held for s in parse_batch(orjson.dumps([BASE]), compact=True, held={held.id: held}.get))
    assert not DataSegment.from_json(BASE).announced_as(BASE)  # a plain segment keeps its load spec
    partitioned = {**BASE, "shardSpec": {"type": "numbered", "partitionNum": 3, "partitions": 4}}
    assert DataSegment.from_json(partitioned, compact=True).announced_as(partitioned)
