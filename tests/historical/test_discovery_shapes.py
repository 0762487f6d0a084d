"""Discovery shapes against Druid's documented JSON (reference samples written out here)."""

from __future__ import annotations

import re

import orjson
import pytest

from strata.discovery import (
    BatchLimits,
    ChangeCounter,
    ChangeRequest,
    ChangeRequestsSnapshot,
    ServerMetadata,
    ServerType,
    ZkPaths,
    batch_znode_name,
    encode_batch,
    encode_segment,
    parse_batch,
)
from timeline import DataSegment

DRUID_SEGMENT = {
    "dataSource": "wikipedia", "interval": "2012-05-23T00:00:00.000Z/2012-05-24T00:00:00.000Z",
    "version": "2012-05-24T00:10:00.046Z", "loadSpec": {"type": "local", "path": "/x/index.parquet"},
    "dimensions": "d1,d2,d3", "metrics": "m1,m2", "shardSpec": {"type": "none"}, "binaryVersion": 9,
    "size": 12345,
    "identifier": "wikipedia_2012-05-23T00:00:00.000Z_2012-05-24T00:00:00.000Z_2012-05-24T00:10:00.046Z",
}  # fmt: skip


def test_paths() -> None:
    paths = ZkPaths("druid/")
    assert paths.announcements == "/druid/announcements"
    assert paths.segments == "/druid/segments"
    assert paths.announcement("h:8083") == "/druid/announcements/h:8083"
    assert paths.batch("h:8083", "b1") == "/druid/segments/h:8083/b1"
    for bad in ("/", "", "a//b"):
        with pytest.raises(ValueError):
            ZkPaths(bad)
    with pytest.raises(ValueError):
        paths.announcement("a/b")


def test_server_metadata_round_trips_druid_json() -> None:
    druid = {"name": "host:8083", "host": "host:8083", "hostAndTlsPort": None, "maxSize": 300000000000,
             "type": "historical", "tier": "_default_tier", "priority": 0}  # fmt: skip
    meta = ServerMetadata.from_bytes(orjson.dumps(druid))
    assert meta.type is ServerType.HISTORICAL and meta.max_size == 300000000000
    assert meta.to_json() == druid
    assert (
        ServerMetadata.from_json({"name": "x:1", "type": "INDEXER_EXECUTOR"}).type
        is ServerType.INDEXER_EXECUTOR
    )
    for bad in (b"[]", b"{", b'{"name":"x:1","type":"toaster"}', b'{"type":"historical"}'):
        with pytest.raises(ValueError):
            ServerMetadata.from_bytes(bad)


def test_batch_name_follows_druid() -> None:
    name = batch_znode_name("h:8083", "historical", "_default_tier", 7)
    assert re.fullmatch(
        r"h:8083_historical__default_tier_\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z_[0-9a-f]{32}7", name
    )


def test_batch_round_trip_and_bad_entries() -> None:
    segment = DataSegment.from_json(DRUID_SEGMENT)
    data = encode_batch([encode_segment(segment)])
    assert orjson.loads(data) == [DRUID_SEGMENT]
    assert parse_batch(data) == [segment]
    assert parse_batch(orjson.dumps([DRUID_SEGMENT, {"dataSource": "x"}])) == [segment]
    assert parse_batch(None) == []
    with pytest.raises(ValueError):
        parse_batch(b'{"a":1}')
    with pytest.raises(ValueError):
        BatchLimits(max_bytes_per_node=10)


def test_change_snapshot_shapes() -> None:
    segment = DataSegment.from_json(DRUID_SEGMENT)
    snap = ChangeRequestsSnapshot.success(ChangeCounter(42, 1724000000000),
                                          (ChangeRequest("load", segment), ChangeRequest("noop")))  # fmt: skip
    body = snap.to_json()
    assert body == {"resetCounter": False, "resetCause": None, "counter": {"counter": 42, "hash": 1724000000000},
                    "requests": [{"action": "load", **DRUID_SEGMENT}, {"action": "noop"}]}  # fmt: skip
    assert ChangeRequestsSnapshot.from_json(orjson.loads(orjson.dumps(body))) == snap
    fail = ChangeRequestsSnapshot.fail("hash mismatch").to_json()
    assert fail == {"resetCounter": True, "resetCause": "hash mismatch", "counter": None, "requests": None}
    schema = {**body, "requests": [{"action": "schema", "x": 1}]}
    assert ChangeRequestsSnapshot.from_json(schema).requests == ()
