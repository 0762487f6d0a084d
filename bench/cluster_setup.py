"""Shared by the cluster benchmarks: synthetic segments, a real cluster, and the baseline workloads
(native query beside DuckDB SQL). Timing and load clients are in bench.measure.

The data is written straight into deep storage in the segment layout and published in a SQLite
metadata store, so the benchmarks spend their time on queries, not on ingestion. The cluster is
real processes: ZooKeeper, two `strata historical` (replicas 1, so each serves about half the
segments) and as many `strata broker` processes as a benchmark asks for, all stopped by pid.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import httpx
import numpy as np
import pyarrow as pa

from harness.processes import StrataProcess
from strata.cli.local_servers import MemcachedServer, ZooKeeperServer, free_port
from strata.storage import open_metadata_store
from strata.storage.deep_storage import SEGMENT_FILE, LocalDeepStorage
from strata.storage.segment_file import write_segment_file
from timeline import DataSegment, Interval, ShardSpec, format_instant

HOUR_MS = 3_600_000
START_MS = 1_577_836_800_000  # 2020-01-01T00:00:00Z
VERSION = "2020-06-01T00:00:00.000Z"
METRICS = [
    {"type": "longSum", "name": "added", "fieldName": "added"},
    {"type": "doubleSum", "name": "score", "fieldName": "score"},
]


@dataclass(frozen=True)
class Dataset:
    name: str
    rows: int
    segments: int
    files: list[str]

    @property
    def interval(self) -> str:
        return f"{format_instant(START_MS)}/{format_instant(START_MS + self.segments * HOUR_MS)}"

    def parquet_list(self) -> str:
        """The files as a DuckDB list literal, for `read_parquet([...])`."""
        return "[" + ", ".join(f"'{f}'" for f in self.files) + "]"


def synthetic_rows(rows: int, hours: int, seed: int, pages: int = 5000) -> pa.Table:
    """Rows spread over `hours` hours: low (country, channel) and zipf-skewed (page, `pages` values)
    dimensions."""
    rng = np.random.default_rng(seed)
    times = np.sort(START_MS + rng.integers(0, hours * HOUR_MS, rows))
    countries = np.array([f"country{i:02d}" for i in range(50)])
    channels = np.array([f"#ch{i}" for i in range(20)])
    names = np.array([f"page{i}" for i in range(pages)])
    return pa.table(
        {
            "__time": pa.array(times, pa.int64()).cast(pa.timestamp("ms", tz="UTC")),
            "country": pa.array(countries[rng.integers(0, 50, rows)]),
            "channel": pa.array(channels[rng.integers(0, 20, rows)]),
            "page": pa.array(names[(rng.zipf(1.2, rows) - 1) % pages]),
            "added": pa.array(rng.integers(0, 1000, rows), pa.int64()),
            "score": pa.array(rng.random(rows), pa.float64()),
        }
    )


def write_dataset(
    root: Path, name: str, rows: int, segments: int, seed: int = 7, pages: int = 5000
) -> Dataset:
    """`segments` hourly segments of `rows` rows in total, pushed to `root/deep` and published."""
    table = synthetic_rows(rows, segments, seed, pages)
    dims = [{"name": d, "type": "string"} for d in ("country", "channel", "page")]
    return write_hourly(root, name, table, segments, dims, METRICS, sort_by=("country", "channel"))


def write_hourly(
    root: Path,
    name: str,
    table: pa.Table,
    segments: int,
    dims: Sequence[dict[str, Any]],
    metrics: Sequence[dict[str, Any]],
    sort_by: Sequence[str] = (),
) -> Dataset:
    """`table` (sorted by `__time`, from START_MS) as `segments` hourly segments in `root/deep`,
    published; `dims` are the footer's dimension entries (segment_layout)."""
    millis = table.column("__time").cast(pa.int64()).to_numpy()
    bounds = np.searchsorted(millis, START_MS + np.arange(segments + 1) * HOUR_MS)
    deep = LocalDeepStorage(root / "deep")
    pushed: list[DataSegment] = []
    for h in range(segments):
        part = table.slice(int(bounds[h]), int(bounds[h + 1] - bounds[h]))
        part = part.sort_by([("__time", "ascending"), *((c, "ascending") for c in sort_by)])
        interval = Interval(START_MS + h * HOUR_MS, START_MS + (h + 1) * HOUR_MS)
        staging = deep.staging_dir()
        facts = {"dataSource": name, "interval": str(interval), "version": VERSION, "partitionNum": 0,
                 "dimensions": list(dims), "metrics": list(metrics), "queryGranularity": {"type": "none"},
                 "rollup": False, "numRows": part.num_rows}  # fmt: skip
        write_segment_file(part, staging / SEGMENT_FILE, facts)
        segment = DataSegment(name, interval, VERSION, dimensions=tuple(d["name"] for d in dims),
                              metrics=tuple(m["name"] for m in metrics),
                              shard_spec=ShardSpec.numbered(0, 1))  # fmt: skip
        pushed.append(deep.push(staging, segment))
    publish(root, pushed)
    return Dataset(name, table.num_rows, segments, [str(s.load_spec["path"]) for s in pushed])


def publish(root: Path, segments: Sequence[DataSegment]) -> None:
    """Publish `segments` in the SQLite metadata store under `root`, in one transaction."""
    store = open_metadata_store(root / "meta.db")
    try:
        store.publish(segments, overwrite=False)
    finally:
        store.close()


class BenchProcess(StrataProcess):
    """`python -P`: the child imports the installed packages, never a same-named folder of the cwd."""

    def argv(self) -> list[str]:
        return [sys.executable, "-P", *super().argv()[1:]]


@dataclass
class Cluster:
    """ZooKeeper + two historicals + brokers, all real processes under `root`."""

    root: Path
    zk: ZooKeeperServer | None = None
    historicals: list[StrataProcess] = field(default_factory=list)
    brokers: list[StrataProcess] = field(default_factory=list)
    memcached: list[MemcachedServer] = field(default_factory=list)
    base: str = field(default_factory=lambda: f"/strata-bench-{uuid.uuid4().hex[:8]}")

    @property
    def zk_hosts(self) -> str:
        assert self.zk is not None
        return self.zk.address

    def start_zookeeper(self) -> None:
        if self.zk is None:
            self.zk = ZooKeeperServer(port=free_port(), data_dir=self.root / "zk").start()

    def start_data_nodes(
        self, count: int = 2, cache_format: str = "arrow", poll_period_s: float = 1, replicas: int = 1
    ) -> None:
        self.start_zookeeper()
        common = ["--zk", self.zk_hosts, "--zk-base", self.base, "--deep-storage", str(self.root / "deep"),
                  "--metadata", str(self.root / "meta.db"), "--replicas", str(replicas),
                  "--poll-period", str(poll_period_s), "--segment-cache-format", cache_format]  # fmt: skip
        for i in range(count):
            node = BenchProcess("historical", [*common, "--segment-cache", str(self.root / f"segcache{i}")],
                                 self.root / f"historical{i}.log")  # fmt: skip
            self.historicals.append(node)
            node.start(timeout=60)

    def start_memcached(self) -> str:
        server = MemcachedServer(port=free_port(), memory_mb=256).start()
        self.memcached.append(server)
        return server.address

    def start_broker(self, *args: str) -> StrataProcess:
        broker = BenchProcess("broker", ["--zk", self.zk_hosts, "--zk-base", self.base, *args],
                               self.root / f"broker{len(self.brokers)}.log")  # fmt: skip
        self.brokers.append(broker)
        broker.start(timeout=60)
        return broker

    def stop_broker(self, broker: StrataProcess) -> None:
        broker.stop()
        self.brokers.remove(broker)

    def stop(self) -> None:
        for p in [*self.brokers, *self.historicals]:
            try:
                p.stop()
            except Exception:
                p.kill()
        for m in self.memcached:
            m.stop()
        if self.zk is not None:
            self.zk.stop()


@contextmanager
def cluster(root: Path | None = None) -> Iterator[Cluster]:
    """A cluster that is stopped (by pid) whatever happens; a directory made here is removed after."""
    c = Cluster(root or Path(tempfile.mkdtemp(prefix="strata-bench-")))
    try:
        yield c
    finally:
        c.stop()
        if root is None:
            shutil.rmtree(c.root, ignore_errors=True)


def wait_for_segments(
    process: StrataProcess, count: int, timeout: float = 180.0, nodes: Sequence[StrataProcess] = ()
) -> None:
    """Until the broker's view (`/status` segments) holds at least `count` segments and, with
    `nodes` (one replica each), those nodes together serve exactly `count`: a rebalance still
    moving segments would otherwise run under the timings, and a segment dropped by its old node
    before the broker hears of its new one reads as missing."""
    deadline = time.monotonic() + timeout
    seen = served = -1
    while time.monotonic() < deadline:
        seen = httpx.get(process.url + "/status", timeout=5).json().get("segments", -1)
        if seen >= count and nodes:
            served = sum(len(served_segments(n)) for n in nodes)
        if seen >= count and (not nodes or served == count):
            return
        time.sleep(0.5)
    tail = process.log_text()[-3000:]
    raise RuntimeError(f"broker saw {seen} of {count} segments, the nodes served {served}, "
                       f"after {timeout:.0f}s:\n{tail}")  # fmt: skip


def served_segments(node: StrataProcess) -> list[dict[str, Any]]:
    """The segments a historical announces, from its HTTP change feed (full snapshot)."""
    params = {"counter": -1, "timeout": 1000}
    body = httpx.get(node.url + "/druid-internal/v1/segments", params=params, timeout=30).json()
    loads = [r for r in body["requests"] if r.get("action") == "load"]
    return [{k: v for k, v in r.items() if k != "action"} for r in loads]


AGGS = [
    {"type": "count", "name": "rows"},
    {"type": "longSum", "name": "added", "fieldName": "added"},
    {"type": "doubleSum", "name": "score", "fieldName": "score"},
]


ETERNITY = "-146136543-09-08T08:23:32.096Z/146140482-04-24T15:36:27.903Z"


def duckdb_baseline() -> duckdb.DuckDBPyConnection:
    """The DuckDB a benchmark compares with, set up as an expert would for repeated queries over
    the same immutable files: UTC, parsed Parquet footers kept across queries (as Strata's are)."""
    conn = duckdb.connect()
    conn.execute("SET TimeZone = 'UTC'")
    conn.execute("SET parquet_metadata_cache = true")
    return conn


def workloads(ds: Dataset, context: dict[str, Any] | None = None) -> dict[str, tuple[dict[str, Any], str]]:
    """Native query and the equivalent DuckDB SQL over the dataset's Parquet files.

    Time buckets are integer arithmetic on epoch milliseconds, DuckDB's fastest way to an hour
    (~30% less time here than `time_bucket` on the time-zone-aware `__time`).
    """
    src = f"read_parquet({ds.parquet_list()})"
    base = {"dataSource": ds.name, "intervals": [ds.interval], "context": context or {}}
    return {
        "count eternity": (
            {
                **base,
                "intervals": [ETERNITY],
                "queryType": "timeseries",
                "granularity": "all",
                "aggregations": [{"type": "count", "name": "rows"}],
            },
            f"SELECT count(*) FROM {src}",
        ),
        "timeseries hour": (
            {**base, "queryType": "timeseries", "granularity": "hour", "aggregations": AGGS},
            f"SELECT epoch_ms(__time) // {HOUR_MS} * {HOUR_MS} t, count(*), sum(added), sum(score) "
            f"FROM {src} GROUP BY t ORDER BY t",
        ),
        "topN page x10": (
            {
                **base,
                "queryType": "topN",
                "granularity": "all",
                "dimension": "page",
                "metric": "added",
                "threshold": 10,
                "aggregations": AGGS,
            },
            f"SELECT page, sum(added) a, count(*), sum(score) FROM {src} "
            "GROUP BY page ORDER BY a DESC LIMIT 10",
        ),
        "groupBy country,channel": (
            {
                **base,
                "queryType": "groupBy",
                "granularity": "all",
                "dimensions": ["country", "channel"],
                "aggregations": AGGS,
            },
            f"SELECT country, channel, count(*), sum(added), sum(score) FROM {src} GROUP BY ALL ORDER BY ALL",
        ),
        "groupBy country,channel filtered": (
            {
                **base,
                "queryType": "groupBy",
                "granularity": "all",
                "dimensions": ["country", "channel"],
                "aggregations": AGGS,
                "filter": {
                    "type": "in",
                    "dimension": "country",
                    "values": ["country01", "country07", "country42"],
                },
            },
            f"SELECT country, channel, count(*), sum(added), sum(score) FROM {src} "
            "WHERE country IN ('country01', 'country07', 'country42') GROUP BY ALL ORDER BY ALL",
        ),
    }
