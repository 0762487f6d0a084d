"""Small real segments for historical tests: Parquet + descriptor pushed to a temp deep storage,
published to a temp SQLite metadata store (the same layout `strata ingest` produces)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
from kazoo.client import KazooClient

from harness.processes import StrataProcess
from strata.discovery import ZkPaths
from strata.storage import LocalDeepStorage, open_metadata_store
from strata.storage.segment_file import write_segment_file
from timeline import DataSegment, Interval, RowFacts, ShardSpec, format_instant, with_row_facts


def as_published(announced: dict[str, Any]) -> dict[str, Any]:
    """An announced segment's JSON without the row facts the historical adds (it must have them)."""
    segment = DataSegment.from_json(announced)
    assert RowFacts.of(segment) is not None, f"{segment.id} announced without its row count"
    return with_row_facts(segment, None).to_json()


def build_segment(deep: LocalDeepStorage, data_source: str, day: int, *, version: str = "2024-01-01T00:00:00.000Z",
                  partition: int = 0, partitions: int = 1, rows: int = 20) -> DataSegment:  # fmt: skip
    start = datetime(2015, 9, 1, tzinfo=UTC) + timedelta(days=day)
    start_ms = int(start.timestamp() * 1000)
    interval = Interval(start_ms, start_ms + 86_400_000)
    table = pa.table({
        "__time": pa.array([start_ms + i * 60_000 for i in range(rows)], pa.timestamp("ms", tz="UTC")),
        "page": pa.array([f"p{i % 3}" for i in range(rows)], pa.string()),
        "count": pa.array([1] * rows, pa.int64()),
    })  # fmt: skip
    staging = deep.staging_dir()
    facts = {"dataSource": data_source, "interval": str(interval), "version": version,
             "partitionNum": partition, "dimensions": [{"name": "page", "type": "string"}],
             "metrics": [{"type": "count", "name": "count"}], "queryGranularity": "none",
             "rollup": False, "numRows": rows}  # fmt: skip
    write_segment_file(table, staging / "index.parquet", facts)
    shard = ShardSpec.from_json({"type": "numbered", "partitionNum": partition, "partitions": partitions})
    segment = DataSegment(
        data_source, interval, version, dimensions=("page",), metrics=("count",), shard_spec=shard
    )
    return deep.push(staging, segment)


@dataclass
class HistoricalCluster:
    """A deep storage + metadata store on disk and historical processes over them."""

    root: Path
    zk_hosts: str | None = None
    zk_base: str = "/druid"
    processes: list[StrataProcess] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.deep = LocalDeepStorage(self.root / "deep")
        self.metadata_path = self.root / "metadata.db"

    def publish(self, segments: Sequence[DataSegment]) -> None:
        store = open_metadata_store(self.metadata_path)
        try:
            store.publish(segments, overwrite=False)
        finally:
            store.close()

    def mark_unused(self, ids: Sequence[str]) -> None:
        store = open_metadata_store(self.metadata_path)
        try:
            store.mark_unused(ids)
        finally:
            store.close()

    def add_segments(self, data_source: str, days: Sequence[int]) -> list[DataSegment]:
        segments = [build_segment(self.deep, data_source, d) for d in days]
        self.publish(segments)
        return segments

    def historical(
        self, name: str, *, replicas: int = 2, zk: bool = True, extra: Sequence[str] = ()
    ) -> StrataProcess:
        args = ["--deep-storage", str(self.deep.root), "--metadata", str(self.metadata_path),
                "--segment-cache", str(self.root / f"cache-{name}"), "--replicas", str(replicas),
                "--poll-period", "0.5", *extra]  # fmt: skip
        if zk and self.zk_hosts:
            args += ["--zk", self.zk_hosts, "--zk-base", self.zk_base]
        process = StrataProcess("historical", args, self.root / f"{name}.log")
        self.processes.append(process)
        return process

    def stop_all(self) -> None:
        for p in self.processes:
            try:
                p.stop()
            except Exception:
                p.kill()


def unique_base(tag: str) -> str:
    return f"/strata-test/{tag}-{os.getpid()}-{time.monotonic_ns()}"


@contextmanager
def kazoo(hosts: str) -> Iterator[KazooClient]:
    zk = KazooClient(hosts=hosts, timeout=10.0)
    zk.start(timeout=20)
    try:
        yield zk
    finally:
        zk.stop()
        zk.close()


def served_ids(zk: KazooClient, paths: ZkPaths) -> dict[str, list[str]]:
    """Server -> segment ids it announces, read straight from the znodes' raw JSON."""
    import orjson

    out: dict[str, list[str]] = {}
    if not zk.exists(paths.segments):
        return out
    for server in zk.get_children(paths.segments):
        ids: list[str] = []
        folder = f"{paths.segments}/{server}"
        for batch in zk.get_children(folder):
            try:
                data, _ = zk.get(f"{folder}/{batch}")
            except Exception:  # vanished while reading
                continue
            ids.extend(item["identifier"] for item in orjson.loads(data))
        out[server] = ids
    return out


def wait_until(predicate: object, timeout: float, what: str, interval: float = 0.1) -> None:
    assert callable(predicate)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


__all__ = [
    "HistoricalCluster",
    "build_segment",
    "format_instant",
    "kazoo",
    "served_ids",
    "unique_base",
    "wait_until",
]
