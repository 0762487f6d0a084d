"""How the broker scales: with the number of segments, and with the number of concurrent clients.

    python -m bench.scaling [--counts 10,100,1000,10000] [--rows-per-segment 50] [--repeat 5]
                            [--clients 1,4,16,64] [--seconds 3] [--many 100000]

1. Latency against segment count: an all-time timeseries (count, sum, sum) over N one-hour
   segments (N = `--counts`, spans of N hours), cold (cache off) and warm (served from the
   per-segment LRU cache of a second broker), beside DuckDB over the same Parquet files. Target:
   cached over 10,000 segments under 300 ms, cost growing no faster than linearly.
2. Queries per second against concurrency: the same warm timeseries over the 100-segment (or
   nearest) datasource with 1 to 64 keep-alive clients.
3. With `--many N` (e.g. 100000): N tiny one-hour segments on a cluster of their own
   (`bench.many_segments`: historical start-to-announced, broker memory per segment, cold and
   cached timeseries, one-day timeline lookups), its figures under `many`.
Nothing is asserted: the figures are printed, then one JSON line.
"""

from __future__ import annotations

import argparse
import json
import statistics
from typing import Any

import httpx

from bench import many_segments
from bench.cluster_setup import AGGS, Dataset, cluster, duckdb_baseline, wait_for_segments, write_dataset
from bench.measure import load_test, log, post_query, spread, time_calls

COLD = {
    "useCache": False,
    "populateCache": False,
    "useResultLevelCache": False,
    "populateResultLevelCache": False,
}
WARM = {"useResultLevelCache": False, "populateResultLevelCache": False}  # the per-segment cache path


def timeseries(ds: Dataset, context: dict[str, Any]) -> dict[str, Any]:
    return {"queryType": "timeseries", "dataSource": ds.name, "intervals": [ds.interval],
            "granularity": "all", "aggregations": AGGS, "context": context}  # fmt: skip


def by_segment_count(plain: str, cached: str, datasets: list[Dataset], repeat: int) -> list[dict[str, Any]]:
    conn = duckdb_baseline()
    out = []
    with httpx.Client(timeout=600) as client:
        for ds in datasets:
            post_query(client, cached, timeseries(ds, WARM))  # fills the cache
            cold = time_calls(lambda ds=ds: post_query(client, plain, timeseries(ds, COLD)), repeat)
            warm = time_calls(lambda ds=ds: post_query(client, cached, timeseries(ds, WARM)), repeat)
            sql = f"SELECT count(*), sum(added), sum(score) FROM read_parquet({ds.parquet_list()})"
            duck = time_calls(lambda sql=sql: conn.execute(sql).fetchall(), repeat)
            entry = {
                "segments": ds.segments,
                "rows": ds.rows,
                "cold_ms": spread(cold),
                "warm_ms": spread(warm),
                "duckdb_ms": spread(duck),
                "cold_us_per_segment": round(statistics.median(cold) * 1e6 / ds.segments),
                "warm_us_per_segment": round(statistics.median(warm) * 1e6 / ds.segments),
            }
            out.append(entry)
            log(f"  {ds.segments:6,} segments  cold {entry['cold_ms']:>22s} ms  "
                f"warm {entry['warm_ms']:>22s} ms  DuckDB {entry['duckdb_ms']:>22s} ms")  # fmt: skip
    return out


def by_concurrency(cached: str, ds: Dataset, clients: list[int], seconds: float) -> list[dict[str, Any]]:
    out = []
    for n in clients:
        result = load_test(cached, timeseries(ds, WARM), concurrency=n, seconds=seconds)
        out.append({"clients": n, **result.summary()})
        log(f"  {n:3d} clients  {result.row()}")
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--counts", default="10,100,1000,10000")
    parser.add_argument("--rows-per-segment", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--clients", default="1,4,16,64")
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--segment-cache-format", choices=["arrow", "parquet"], default="arrow",
                        help="what the historicals' queries read (their option of that name)")  # fmt: skip
    parser.add_argument("--many", type=int, default=0,
                        help="then this many tiny one-hour segments (bench.many_segments)")  # fmt: skip
    args = parser.parse_args(argv)
    counts = [int(c) for c in args.counts.split(",")]
    clients = [int(c) for c in args.clients.split(",")]
    report: dict[str, Any] = {"rows_per_segment": args.rows_per_segment}
    with cluster() as c:
        datasets = [write_dataset(c.root, f"s{n}", n * args.rows_per_segment, n, seed=n) for n in counts]
        c.start_data_nodes(2, args.segment_cache_format)
        plain = c.start_broker("--cache", "none")
        cached = c.start_broker("--cache", "lru", "--cache-size", str(512 * 1024 * 1024))
        for b in (plain, cached):
            wait_for_segments(b, sum(counts), timeout=900, nodes=c.historicals)
        per = args.rows_per_segment
        log(f"latency against segment count ({per} rows each; median [min-max] of {args.repeat}):")
        report["segments"] = by_segment_count(plain.url, cached.url, datasets, args.repeat)
        middle = min(datasets, key=lambda d: abs(d.segments - 100))
        log(f"queries/s against concurrency, warm timeseries over {middle.segments} segments:")
        report["concurrency"] = by_concurrency(cached.url, middle, clients, args.seconds)
        report["concurrency_segments"] = middle.segments
    if args.many:
        log(f"{args.many:,} tiny one-hour segments:")
        report["many"] = many_segments.run(args.many, rows_per_segment=2, repeat=args.repeat)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
