"""What a dead memcached costs the broker (issue 15): target at most 1.1x the no-cache median.

    python -m bench.cache_down [--rows 1000000] [--segments 50] [--repeat 15] [--seconds 5] [--concurrency 8]

One cluster (ZooKeeper, two historicals) and two brokers: `--cache none`, and `--cache memcached`
whose memcached is killed after one populating query (its circuit breaker then opens and stays
open). For timeseries (hour) and topN over every segment, medians of `--repeat` runs, interleaved
(none / memcached down / DuckDB over the same Parquet files) so machine load hits them alike; then
queries per second with `--concurrency` clients for each broker. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

import duckdb
import httpx

from bench.cache import cache_workloads, first_difference, timed
from bench.cluster_setup import cluster, wait_for_segments, write_dataset
from bench.measure import load_test, log, spread


def main(argv: list[str] | None = None) -> None:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--segments", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--seconds", type=float, default=5.0, help="length of each throughput run")
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args(argv)

    report: dict[str, Any] = {"rows": args.rows, "segments": args.segments, "latency": [], "throughput": []}
    with cluster() as c:
        ds = write_dataset(c.root, "bench", args.rows, args.segments)
        c.start_data_nodes(2)
        memcached = c.start_memcached()
        brokers = {
            "none": c.start_broker("--cache", "none"),
            "memcached down": c.start_broker("--cache", "memcached", "--memcached", memcached),
        }
        for b in brokers.values():
            wait_for_segments(b, args.segments)
        work = cache_workloads(ds)
        with httpx.Client() as client:
            for body, _sql in work.values():
                timed(client, brokers["memcached down"].url, body)  # populate, then kill
            c.memcached[0].kill()
            timed(client, brokers["memcached down"].url, next(iter(work.values()))[0])  # trips the breaker
            status = httpx.get(brokers["memcached down"].url + "/status/cache", timeout=5).json()
            breakers = status["breakers"]
            log(f"{args.rows:,} rows in {args.segments} segments; memcached killed, breakers: {breakers}")
            conn = duckdb.connect()
            log(f"median [min-max] of {args.repeat}, ms:")
            for name, (body, sql) in work.items():
                times: dict[str, list[float]] = {k: [] for k in (*brokers, "duckdb")}
                answers: dict[str, Any] = {}
                for _ in range(args.repeat):
                    for kind, broker in brokers.items():
                        seconds, answers[kind] = timed(client, broker.url, body)
                        times[kind].append(seconds)
                    t = time.perf_counter()
                    conn.execute(sql).fetchall()
                    times["duckdb"].append(time.perf_counter() - t)
                ratio = statistics.median(times["memcached down"]) / statistics.median(times["none"])
                same = first_difference(answers["none"], answers["memcached down"]) is None
                log(f"  {name:16s} none {spread(times['none']):>18s}  memcached down "
                    f"{spread(times['memcached down']):>18s}  duckdb {spread(times['duckdb']):>18s}  "
                    f"down/none {ratio:4.2f}x  same answers: {same}")  # fmt: skip
                report["latency"].append({"query": name, "ratio": round(ratio, 3), "same": same,
                                          **{f"{k}_ms": spread(v) for k, v in times.items()}})  # fmt: skip
        body = work["timeseries hour"][0]
        log(f"throughput, timeseries hour, {args.concurrency} clients, {args.seconds:.0f}s:")
        for kind, broker in brokers.items():
            result = load_test(broker.url, body, args.concurrency, args.seconds)
            log(f"  {kind:15s} {result.row()}")
            report["throughput"].append({"cache": kind, "row": result.row()})
    print(json.dumps(report))


if __name__ == "__main__":
    main()
