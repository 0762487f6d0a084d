"""Packing segments into Spark partitions and a task's segments into data-node requests, and which
segments a task may read from their files (end to end in test_spark_read.py, test_segment_files.py)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pyarrow as pa
import pytest
from pyspark.sql.types import StructField, StructType, TimestampType

from strata.spark import data_nodes
from strata.spark.data_nodes import node_requests
from strata.spark.reader import SegmentsPartition, Split, TableReader, node_urls, pack
from strata.storage import open_metadata_store
from timeline import DataSegment, Interval, ShardSpec


@pytest.mark.parametrize("n", [0, 1, 2, 3, 7, 24])
@pytest.mark.parametrize("parts", [1, 2, 3, 5, 30])
def test_pack_uses_every_index_once_in_order(n: int, parts: int) -> None:
    sizes = [(i * 37) % 11 for i in range(n)]  # some zero sizes too
    runs = pack(sizes, parts)
    assert len(runs) == min(n, parts)
    assert all(runs)  # no empty partition
    assert list(itertools.chain.from_iterable(runs)) == list(range(n))


def test_pack_balances_by_size() -> None:
    sizes = [100, 1, 1, 1, 1, 100, 1, 1, 1, 1]
    runs = pack(sizes, 2)
    totals = [sum(sizes[i] for i in run) for run in runs]
    assert totals == [104, 104]
    assert pack([5] * 8, 4) == [[0, 1], [2, 3], [4, 5], [6, 7]]


def test_a_run_ends_at_the_nearer_side_of_its_share() -> None:
    # hourly segments differ by a few bytes: a run that ended only once past half the total took
    # 5 of these 8 segments and the read lasted as long as that task
    assert pack([1000, 1000, 1000, 999, 1000, 1000, 1001, 1000], 2) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    sizes = [1000 + (i * 7) % 5 - 2 for i in range(100)]
    totals = [sum(sizes[i] for i in run) for run in pack(sizes, 2)]
    assert max(totals) - min(totals) <= max(sizes)


def test_node_urls_keep_historicals_only() -> None:
    locations = [
        {"name": "h1:8083", "host": "h1:8083", "type": "historical"},
        {"name": "r1:8100", "host": "r1:8100", "type": "realtime"},
        {"name": "b1:8083", "host": "b1:8083", "type": "bridge"},
    ]
    assert node_urls(locations) == ["http://h1:8083", "http://b1:8083"]


def seg(i: int) -> dict[str, object]:
    return {"itvl": f"2020-01-01T{i:02d}/2020-01-01T{i + 1:02d}", "ver": "v", "part": 0}


def test_one_request_per_node_and_the_unserved_to_the_broker() -> None:
    segments = [seg(i) for i in range(5)]
    servers = [["http://a"], ["http://b", "http://a"], ["http://a"], [], ["http://b"]]
    requests, unserved = node_requests(segments, servers, [10] * 5)
    assert requests == [("http://a", [seg(0), seg(2)]), ("http://b", [seg(1), seg(4)])]
    assert unserved == [seg(3)]


def test_a_request_is_split_past_its_byte_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(data_nodes, "MAX_REQUEST_BYTES", 25)
    segments = [seg(i) for i in range(4)]
    requests, _ = node_requests(segments, [["http://a"]] * 4, [10, 10, 10, 30])
    assert requests == [("http://a", [seg(0), seg(1)]), ("http://a", [seg(2)]), ("http://a", [seg(3)])]


class FakeBroker:
    """The broker's candidates listing and scans, as the reader asks them (a unit test's stand-in;
    the real cluster is in test_segment_files.py)."""

    timeout_s = 5.0

    def __init__(self, candidates: list[dict[str, Any]]) -> None:
        self.listing = candidates
        self.scanned: list[list[dict[str, Any]]] = []

    def candidates(self, data_source: str, intervals: list[str]) -> list[dict[str, Any]]:
        return self.listing

    def scan_batches(self, query: dict[str, Any]) -> Iterator[pa.RecordBatch]:
        self.scanned.append(query["intervals"]["segments"])
        yield pa.record_batch({"__time": pa.array([START_MS], pa.int64())})


START_MS = 1_442_016_000_000  # 2015-09-12T00:00Z


def test_segments_only_a_realtime_node_serves_are_read_through_the_broker(tmp_path: Path) -> None:
    hours = [Interval(START_MS + h * 3_600_000, START_MS + (h + 1) * 3_600_000) for h in range(2)]
    published = [DataSegment("rt", iv, "v1", load_spec={"type": "local", "path": str(tmp_path / f"{h}.parquet")},
                             shard_spec=ShardSpec.numbered(0, 1)) for h, iv in enumerate(hours)]  # fmt: skip
    store = open_metadata_store(tmp_path / "meta.db")
    try:
        store.publish(published, overwrite=False)
    finally:
        store.close()
    kinds = ["historical", "realtime"]  # hour 1 is still served by the realtime node only
    broker = FakeBroker([{"itvl": str(iv), "ver": "v1", "part": 0, "size": 1, "locations": [{"host": f"{k}:1", "type": k}]}
                         for iv, k in zip(hours, kinds, strict=True)])  # fmt: skip
    schema = StructType([StructField("__time", TimestampType())])
    reader = TableReader(cast(Any, broker), "rt", [Interval(hours[0].start, hours[1].end)], schema,
                         {"__time": "LONG"}, Split(partitions=1), {}, metadata=str(tmp_path / "meta.db"))  # fmt: skip
    (part,) = reader.partitions()
    assert isinstance(part, SegmentsPartition)
    assert part.files == [published[0].load_spec["path"], None]
    realtime = SegmentsPartition(part.segments[1:], part.servers[1:], part.sizes[1:], part.files[1:])
    assert sum(b.num_rows for b in reader.read(realtime)) == 1
    assert broker.scanned == [part.segments[1:]]  # the realtime segment went to the broker


class WideBroker(FakeBroker):
    """Answers a scan with one batch of `rows` rows, more than a Spark batch holds."""

    def __init__(self, candidates: list[dict[str, Any]], rows: int) -> None:
        super().__init__(candidates)
        self.rows = rows

    def scan_batches(self, query: dict[str, Any]) -> Iterator[pa.RecordBatch]:
        self.scanned.append(query["intervals"]["segments"])
        yield pa.record_batch({"__time": pa.array(range(START_MS, START_MS + self.rows), pa.int64())})


def test_spark_gets_batches_of_at_most_batch_rows_every_row_once_in_order() -> None:
    hour = Interval(START_MS, START_MS + 3_600_000)
    broker = WideBroker([{"itvl": str(hour), "ver": "v1", "part": 0, "size": 1, "locations": []}], 2_500)
    schema = StructType([StructField("__time", TimestampType())])
    reader = TableReader(cast(Any, broker), "wide", [hour], schema, {"__time": "LONG"}, Split(partitions=1), {},
                         batch_rows=1_000)  # fmt: skip
    (part,) = reader.partitions()
    batches = list(reader.read(part))
    assert [b.num_rows for b in batches] == [1_000, 1_000, 500]
    times = (
        pa.Table.from_batches(batches).column("__time").cast(pa.timestamp("ms")).cast(pa.int64()).to_pylist()
    )
    assert times == list(range(START_MS, START_MS + 2_500))
