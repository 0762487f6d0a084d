"""The many-small-segments case: 100,000 one-hour segments of a few rows each, on a real cluster.

    python -m bench.many_segments [--segments 100000] [--rows-per-segment 2] [--repeat 3]

(also run by `python -m bench.scaling --many N`). Measures, in one run:
- writing the segments straight into deep storage and publishing them in one transaction;
- each historical's start-to-announced time (process start until its change feed announces every
  segment it was assigned) and the broker's start-to-seen time, with ZooKeeper announcements;
- the broker's memory per segment: resident memory of a broker seeing every segment minus that of an
  identical broker seeing none, over the segment count; and the Python heap of the broker's server
  view (timelines, selectors, segments) built in this process under tracemalloc;
- an all-time timeseries cold (cache off) and from the per-segment cache, beside DuckDB;
- the timeline lookup of one day among the segments (median and p99, microseconds).
Nothing is asserted; the figures are printed, then one JSON line.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import shutil
import statistics
import time
import tracemalloc
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pyarrow as pa

from bench.cluster_setup import (
    AGGS,
    HOUR_MS,
    METRICS,
    START_MS,
    VERSION,
    Cluster,
    Dataset,
    cluster,
    duckdb_baseline,
    publish,
    served_segments,
)
from bench.measure import log, post_query, spread, time_calls
from harness.processes import StrataProcess
from strata.storage import open_metadata_store
from strata.storage.deep_storage import SEGMENT_FILE, segment_path
from strata.storage.segment_file import write_segment_file
from timeline import DataSegment, Interval, ShardSpec

COLD = {"useCache": False, "populateCache": False, "useResultLevelCache": False,
        "populateResultLevelCache": False}  # fmt: skip
WARM = {"useResultLevelCache": False, "populateResultLevelCache": False}  # the per-segment cache path
TARGETS = {"cold_ms": 3000, "warm_ms": 100, "broker_rss_bytes_per_segment": 2048, "lookup_1d_median_us": 20}


def write_tiny_segments(root: Path, name: str, segments: int, rows_per_segment: int) -> Dataset:
    """`segments` consecutive one-hour segments of `rows_per_segment` rows, each written straight to
    its place in deep storage (no staging directory, no descriptor file: the historical needs
    neither), then published in one transaction."""
    rows = segments * rows_per_segment
    rng = np.random.default_rng(segments)
    offsets = (np.arange(rows) % rows_per_segment) * (HOUR_MS // rows_per_segment)
    hours = np.arange(rows) // rows_per_segment
    table = pa.table({
        "__time": pa.array(START_MS + hours * HOUR_MS + offsets, pa.timestamp("ms", tz="UTC")),
        "country": pa.array(np.array([f"country{i:02d}" for i in range(50)])[rng.integers(0, 50, rows)]),
        "added": pa.array(rng.integers(0, 1000, rows), pa.int64()),
        "score": pa.array(rng.random(rows), pa.float64()),
    })  # fmt: skip
    deep = (root / "deep").resolve()
    shard = ShardSpec.numbered(0, 1)
    published: list[DataSegment] = []
    for h in range(segments):
        interval = Interval(START_MS + h * HOUR_MS, START_MS + (h + 1) * HOUR_MS)
        segment = DataSegment(name, interval, VERSION, dimensions=("country",), metrics=("added", "score"),
                              shard_spec=shard)  # fmt: skip
        where = deep / segment_path(segment)
        where.mkdir(parents=True)
        facts = {"dataSource": name, "interval": str(interval), "version": VERSION, "partitionNum": 0,
                 "dimensions": [{"name": "country", "type": "string"}], "metrics": METRICS,
                 "queryGranularity": {"type": "none"}, "rollup": False,
                 "numRows": rows_per_segment}  # fmt: skip
        rows_of_hour = table.slice(h * rows_per_segment, rows_per_segment)
        size = write_segment_file(rows_of_hour, where / SEGMENT_FILE, facts)
        load_spec = {"type": "local", "path": str(where / SEGMENT_FILE)}
        published.append(DataSegment(name, interval, VERSION, load_spec, segment.dimensions, segment.metrics,
                                     shard, size=size))  # fmt: skip
    publish(root, published)
    return Dataset(name, rows, segments, [str(s.load_spec["path"]) for s in published])


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def broker_segments(broker: StrataProcess) -> int:
    return int(httpx.get(broker.url + "/status", timeout=30).json().get("segments", -1))


def start_to_announced(c: Cluster, count: int, nodes: int, timeout: float) -> dict[str, Any]:
    """Start the historicals (at once, so each is assigned its share from the start) and wait until
    together they serve `count` segments; seconds from the processes' start until each serves all it
    was assigned (its `/status`), and until the broker `c.brokers[0]` sees every segment (the
    announcements went through ZooKeeper)."""
    began = time.monotonic()
    c.start_data_nodes(nodes, poll_period_s=5)
    announced: dict[str, float] = {}
    seen_s = None
    deadline = began + timeout
    while time.monotonic() < deadline and (len(announced) < nodes or seen_s is None):
        states = [httpx.get(n.url + "/status", timeout=60).json()["strata"] for n in c.historicals]
        if sum(s["assigned"] for s in states) == count:
            for node, s in zip(c.historicals, states, strict=True):
                if node.url not in announced and s["segments"] >= s["assigned"]:
                    announced[node.url] = time.monotonic() - began
        if seen_s is None and broker_segments(c.brokers[0]) >= count:
            seen_s = time.monotonic() - began
        time.sleep(1)
    if len(announced) < nodes or seen_s is None:
        raise RuntimeError(f"not all announced within {timeout:.0f}s: {announced}, broker seen {seen_s}")
    return {"historical_start_to_announced_s": [round(s, 1) for s in sorted(announced.values())],
            "broker_start_to_seen_s": round(seen_s, 1)}  # fmt: skip


def view_heap_bytes(nodes: list[StrataProcess]) -> tuple[int, int]:
    """Python heap of a broker server view holding what `nodes` announce, built here under
    tracemalloc (segments parsed from the announcements, as the inventory does), and the count."""
    from broker_service.server_view import BrokerServerView
    from strata.discovery.server_metadata import ServerMetadata

    announced = [(n.address, served_segments(n)) for n in nodes]
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    view = BrokerServerView()
    for name, items in announced:
        view.add_server(ServerMetadata(name, name))
        for item in items:
            view.add_segment(name, DataSegment.from_json(item))
    heap = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    return heap, view.segment_count


def timeline_lookups(segments: int, samples: int) -> dict[str, float]:
    """One-day lookups in a timeline of `segments` consecutive one-hour segments."""
    from timeline import VersionedIntervalTimeline

    tl: VersionedIntervalTimeline[DataSegment] = VersionedIntervalTimeline()
    for h in range(segments):
        s = DataSegment("tiny", Interval(START_MS + h * HOUR_MS, START_MS + (h + 1) * HOUR_MS), VERSION)
        tl.add_segment(s, s)
    rng = random.Random(5)
    times = []
    for _ in range(samples):
        start = START_MS + rng.randrange(0, max(1, segments - 24)) * HOUR_MS
        window = Interval(start, start + 24 * HOUR_MS)
        t = time.perf_counter()
        tl.lookup(window)
        times.append((time.perf_counter() - t) * 1e6)
    times.sort()
    return {"lookup_1d_median_us": round(statistics.median(times), 1),
            "lookup_1d_p99_us": round(times[int(0.99 * (len(times) - 1))], 1)}  # fmt: skip


def written(root: Path, name: str, segments: int, rows_per_segment: int) -> Dataset | None:
    """The dataset a run kept under `root` (`--root`), if it is the one asked for."""
    store = open_metadata_store(root / "meta.db")
    try:
        used = store.used_segments(name)
    finally:
        store.close()
    if len(used) != segments:
        return None
    used.sort(key=lambda s: s.interval.start)
    return Dataset(name, segments * rows_per_segment, segments, [str(s.load_spec["path"]) for s in used])


def run(
    segments: int,
    rows_per_segment: int,
    repeat: int,
    nodes: int = 2,
    duckdb: bool = True,
    root: Path | None = None,
) -> dict[str, Any]:
    out: dict[str, Any] = {"segments": segments, "rows_per_segment": rows_per_segment, "historicals": nodes}
    # in this process before any server starts: a pure in-process figure, which the cluster's
    # processes (still winding down after it stops) would otherwise share the cores with
    out.update(timeline_lookups(segments, 4000))
    with cluster(root) as c:
        t = time.monotonic()
        kept = written(c.root, "tiny", segments, rows_per_segment) if (c.root / "meta.db").exists() else None
        ds = kept or write_tiny_segments(c.root, "tiny", segments, rows_per_segment)
        out["write_and_publish_s"] = None if kept else round(time.monotonic() - t, 1)
        if kept:
            log(f"reusing the {segments:,} segments (and the historicals' segment caches) under --root")
        else:
            log(f"wrote and published {segments:,} segments in {out['write_and_publish_s']} s")
        shutil.rmtree(c.root / "zk", ignore_errors=True)  # a kept root's ZooKeeper state is stale
        c.start_zookeeper()
        cached = c.start_broker("--cache", "lru", "--cache-size", str(1024 * 1024 * 1024))
        plain = c.start_broker("--cache", "none")
        idle_rss = rss_bytes(plain.pid)
        out.update(start_to_announced(c, segments, nodes, timeout=3600))
        log(f"historicals announced all after {out['historical_start_to_announced_s']} s; "
            f"broker saw all after {out['broker_start_to_seen_s']} s")  # fmt: skip
        deadline = time.monotonic() + 600
        while broker_segments(plain) < segments and time.monotonic() < deadline:
            time.sleep(0.5)
        time.sleep(2)  # let the last announcements settle before reading memory
        out["broker_rss_idle_mb"] = round(idle_rss / 2**20, 1)
        out["broker_rss_mb"] = round(rss_bytes(plain.pid) / 2**20, 1)
        out["broker_rss_bytes_per_segment"] = round((rss_bytes(plain.pid) - idle_rss) / segments)
        heap, counted = view_heap_bytes(c.historicals)
        out["server_view_heap_bytes_per_segment"] = round(heap / max(counted, 1))
        log(f"broker RSS {out['broker_rss_idle_mb']} MB idle, {out['broker_rss_mb']} MB with every segment: "
            f"{out['broker_rss_bytes_per_segment']} B/segment; server view heap "
            f"{out['server_view_heap_bytes_per_segment']} B/segment")  # fmt: skip
        query = {"queryType": "timeseries", "dataSource": ds.name, "intervals": [ds.interval],
                 "granularity": "all", "aggregations": AGGS}  # fmt: skip
        with httpx.Client(timeout=600) as client:
            answer = post_query(client, cached.url, {**query, "context": WARM})  # fills the cache
            cold = time_calls(lambda: post_query(client, plain.url, {**query, "context": COLD}), repeat)
            warm = time_calls(lambda: post_query(client, cached.url, {**query, "context": WARM}), repeat)
            out["rows_counted"] = answer[0]["result"]["rows"] if answer else 0
        out["cold_ms"], out["warm_ms"] = spread(cold), spread(warm)
        if duckdb:
            conn = duckdb_baseline()
            sql = f"SELECT count(*), sum(added), sum(score) FROM read_parquet({ds.parquet_list()})"
            out["duckdb_ms"] = spread(time_calls(lambda: conn.execute(sql).fetchall(), repeat))
        log(f"timeseries over {segments:,} segments (median [min-max] of {repeat}): cold {out['cold_ms']} "
            f"ms, per-segment cached {out['warm_ms']} ms, DuckDB {out.get('duckdb_ms', '-')} ms")  # fmt: skip
    median, p99 = out["lookup_1d_median_us"], out["lookup_1d_p99_us"]
    log(f"timeline lookup of one day: median {median} µs, p99 {p99} µs")
    out["targets"] = TARGETS
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--segments", type=int, default=100_000)
    parser.add_argument("--rows-per-segment", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--historicals", type=int, default=2)
    parser.add_argument("--no-duckdb", action="store_true", help="skip DuckDB over the same files")
    parser.add_argument("--root", type=Path, help="keep the segments and segment caches here and reuse them "
                        "next run (the historicals then load from their segment caches)")  # fmt: skip
    args = parser.parse_args(argv)
    if args.root is not None:
        args.root.mkdir(parents=True, exist_ok=True)
    figures = run(
        args.segments, args.rows_per_segment, args.repeat, args.historicals, not args.no_duckdb, args.root
    )
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
