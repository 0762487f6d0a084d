"""Per-segment result cache benchmark (issue 6) against real processes.

    python -m bench.cache [--rows 3000000] [--segments 100] [--repeat 7] [--seconds 8] [--concurrency 16]

One cluster (ZooKeeper, two historicals) and three brokers: `--cache lru`, `--cache memcached` and
`--cache hybrid`, the last two each on a memcached of their own (so one cannot warm the other).
For timeseries (hour) and topN (page by added, 10) over every segment, per broker:
- cold: context useCache=false, populateCache=false -- every segment read by the historicals
  (the cache key leaves out queryId, so a new queryId alone would still hit);
- warm: after one populating query, every segment from the per-segment cache (checked with the
  broker's /status/cache hit counter; useResultLevelCache=false);
- whole: the default context -- the whole answer from the result-level cache;
- DuckDB over the same Parquet files in this process, the baseline for "faster than DuckDB".
Targets: LRU warm >= 20x faster than cold and faster than DuckDB; memcached warm >= 5x faster than
cold and > 1000 queries/s warm with 16 clients. Throughput is measured per broker, and over two
hybrid brokers sharing one memcached with the clients spread over both (two processes behind a
load balancer), and over one `--workers 2` hybrid broker (the same two processes on one port),
for a one-segment timeseries and for the all-segment one. Medians of `--repeat`
with [min-max], cold / warm / DuckDB interleaved so machine load hits them alike. Nothing is
asserted; a JSON line ends the output.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

import duckdb
import httpx

from bench.cluster_setup import (
    AGGS,
    HOUR_MS,
    START_MS,
    Dataset,
    cluster,
    wait_for_segments,
    workloads,
    write_dataset,
)
from bench.measure import load_test, log, post_query, spread
from timeline import format_instant

SEGMENT_LEVEL = {"useResultLevelCache": False, "populateResultLevelCache": False}  # per-segment partials only
COLD = {"useCache": False, "populateCache": False, **SEGMENT_LEVEL}


def cache_workloads(ds: Dataset) -> dict[str, tuple[dict[str, Any], str]]:
    """The cacheable ones (the broker caches neither groupBy nor scan per segment)."""
    return {k: v for k, v in workloads(ds).items() if not k.startswith("groupBy")}


def cache_hits(url: str) -> int:
    return int(httpx.get(url + "/status/cache", timeout=10).json()["query"]["hits"])


def first_difference(a: Any, b: Any, path: str = "") -> str | None:
    """Where two JSON answers differ, floats compared to 1e-9 relative (summation order may vary)."""
    if isinstance(a, float) and isinstance(b, (int, float)):
        return None if abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b)) else f"{path}: {a} != {b}"
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            return f"{path}: keys {sorted(a)} != {sorted(b)}"
        return next((d for k in a if (d := first_difference(a[k], b[k], f"{path}.{k}"))), None)
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return f"{path}: {len(a)} items != {len(b)}"
        pairs = enumerate(zip(a, b, strict=True))
        return next((d for i, (x, y) in pairs if (d := first_difference(x, y, f"{path}[{i}]"))), None)
    return None if a == b else f"{path}: {a!r} != {b!r}"


def timed(client: httpx.Client, url: str, body: dict[str, Any]) -> tuple[float, Any]:
    t = time.perf_counter()
    answer = post_query(client, url, body)
    return time.perf_counter() - t, answer


def cold_warm(
    kind: str, url: str, ds: Dataset, repeat: int, conn: duckdb.DuckDBPyConnection
) -> list[dict[str, Any]]:
    out = []
    with httpx.Client() as client:
        for name, (body, sql) in cache_workloads(ds).items():
            cold_body = {**body, "context": COLD}
            segment_body = {**body, "context": SEGMENT_LEVEL}
            first, _ = timed(client, url, segment_body)  # misses every segment and populates the cache
            timed(client, url, body)  # stores the whole answer too
            before = cache_hits(url)
            cold: list[float] = []
            warm: list[float] = []
            whole: list[float] = []
            duck: list[float] = []
            difference: str | None = None
            for _ in range(repeat):
                seconds, cold_answer = timed(client, url, cold_body)
                cold.append(seconds)
                seconds, warm_answer = timed(client, url, segment_body)
                warm.append(seconds)
                seconds, whole_answer = timed(client, url, body)
                whole.append(seconds)
                difference = (
                    difference
                    or first_difference(cold_answer, warm_answer)
                    or first_difference(cold_answer, whole_answer)
                )
                t = time.perf_counter()
                conn.execute(sql).fetchall()
                duck.append(time.perf_counter() - t)
            hits = (cache_hits(url) - before) / repeat
            same = difference is None
            if difference:
                log(f"  {kind} {name}: cold and warm answers differ at {difference}")
            speedup = statistics.median(cold) / statistics.median(warm)
            vs_duck = statistics.median(duck) / statistics.median(warm)
            out.append({"cache": kind, "query": name, "first_ms": round(first * 1e3, 1),
                        "cold_ms": spread(cold), "warm_ms": spread(warm), "whole_answer_ms": spread(whole),
                        "duckdb_ms": spread(duck),
                        "warm_speedup": round(speedup, 1), "warm_vs_duckdb": round(vs_duck, 2),
                        "hits_per_warm_query": hits, "same_answer": same})  # fmt: skip
            log(
                f"  {kind:9s} {name:16s} first {first * 1e3:7.1f}  cold {spread(cold):>20s}  "
                f"warm {spread(warm):>18s}  whole {spread(whole):>16s}  duckdb {spread(duck):>18s} ms  "
                f"warm {speedup:5.1f}x faster "
                f"than cold, {vs_duck:4.2f}x DuckDB's speed, {hits:.0f} hits/query, same: {same}"
            )
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=3_000_000)
    parser.add_argument("--segments", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--seconds", type=float, default=8.0, help="length of each throughput run")
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args(argv)

    report: dict[str, Any] = {"rows": args.rows, "segments": args.segments, "cold_warm": [], "throughput": []}
    with cluster() as c:
        began = time.monotonic()
        ds = write_dataset(c.root, "bench", args.rows, args.segments)
        c.start_data_nodes(2)
        size = str(1024 * 1024 * 1024)
        shared_memcached = c.start_memcached()
        brokers = {
            "lru": c.start_broker("--cache", "lru", "--cache-size", size),
            "memcached": c.start_broker("--cache", "memcached", "--memcached", c.start_memcached()),
            "hybrid": c.start_broker(
                "--cache", "hybrid", "--cache-size", size, "--memcached", shared_memcached
            ),
        }
        # a second hybrid broker on the same memcached: two processes behind a load balancer
        twin = c.start_broker("--cache", "hybrid", "--cache-size", size, "--memcached", shared_memcached)
        # the same pair as one service: `--workers 2` on one port, the kernel spreading connections
        pooled = c.start_broker(
            "--cache", "hybrid", "--cache-size", size, "--memcached", shared_memcached, "--workers", "2"
        )
        for b in [*brokers.values(), twin, *[pooled] * 4]:  # new connections: each worker is asked
            wait_for_segments(b, args.segments, nodes=c.historicals)
        log(f"{args.rows:,} rows in {args.segments} segments; ZooKeeper, 2 historicals, 2 memcached, "
            f"4 brokers up after {time.monotonic() - began:.1f}s")  # fmt: skip
        conn = duckdb.connect()
        log(f"cold / warm / DuckDB (median [min-max] of {args.repeat}, ms):")
        for kind, broker in brokers.items():
            report["cold_warm"] += cold_warm(kind, broker.url, ds, args.repeat, conn)
        one_hour = f"{format_instant(START_MS)}/{format_instant(START_MS + HOUR_MS)}"
        small = {"queryType": "timeseries", "dataSource": ds.name, "intervals": [one_hour],
                 "granularity": "all", "aggregations": AGGS}  # fmt: skip
        full = workloads(ds)["timeseries hour"][0]
        log(f"warm throughput, {args.concurrency} concurrent clients, {args.seconds:.0f}s each:")
        for kind, broker in brokers.items():
            for label, body in (("1 segment", small), (f"{args.segments} segments", full)):
                for level, context in (("segment", SEGMENT_LEVEL), ("whole", {})):
                    level_body = {**body, "context": context}
                    with httpx.Client() as client:
                        post_query(client, broker.url, level_body)  # populate
                    result = load_test(broker.url, level_body, args.concurrency, args.seconds)
                    log(f"  {kind:9s} timeseries {label:13s} {level:7s} {result.row()}")
                    entry = {"cache": kind, "query": f"timeseries {label}", "level": level}
                    report["throughput"].append({**entry, **result.summary()})
        for label, body in (("1 segment", small), (f"{args.segments} segments", full)):
            for level, context in (("segment", SEGMENT_LEVEL), ("whole", {})):
                level_body = {**body, "context": context}
                urls = [brokers["hybrid"].url, twin.url]
                result = load_test(urls, level_body, args.concurrency, args.seconds)
                log(f"  2 hybrid brokers, one memcached: timeseries {label:13s} {level:7s} {result.row()}")
                entry = {"cache": "hybrid x2 processes", "query": f"timeseries {label}", "level": level}
                report["throughput"].append({**entry, **result.summary()})
                result = load_test(pooled.url, level_body, args.concurrency, args.seconds)
                log(f"  hybrid broker --workers 2:       timeseries {label:13s} {level:7s} {result.row()}")
                entry = {"cache": "hybrid --workers 2", "query": f"timeseries {label}", "level": level}
                report["throughput"].append({**entry, **result.summary()})
    print(json.dumps(report))


if __name__ == "__main__":
    main()
