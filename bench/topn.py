"""Cold topN against DuckDB: issue 31's shape, and where each side spends its CPU.

10M rows (default) in 96 hourly segments, `page` with 10,000 zipf-skewed values, threshold 100,
two `strata historical` processes and a broker caching nothing, beside DuckDB over the same
Parquet files in this process (footers cached, as the historicals keep theirs). The two take
turns, so load from other work hits both alike; the target is at most 0.8x DuckDB's time. The CPU
each side spends per query is printed too: on a busy machine it moves far less than wall time.

    python -m bench.topn [--rows 10000000] [--segments 96] [--pages 10000] [--repeat 9]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

import httpx

from bench.cluster_setup import AGGS, cluster, duckdb_baseline, wait_for_segments, write_dataset
from bench.measure import cpu_seconds, log, post_query, spread, time_calls

NO_CACHE = {"useCache": False, "populateCache": False}
TARGET = 0.8


def cases(name: str, interval: str, src: str, threshold: int) -> dict[str, tuple[dict[str, Any], str]]:
    base = {"dataSource": name, "intervals": [interval], "granularity": "all", "aggregations": AGGS,
            "queryType": "topN", "dimension": "page", "threshold": threshold,
            "context": NO_CACHE}  # fmt: skip
    return {
        f"topN page by added x{threshold}": (
            {**base, "metric": "added"},
            f"SELECT page, count(*), sum(added) AS a, sum(score) FROM {src} GROUP BY page "
            f"ORDER BY a DESC LIMIT {threshold}",
        ),
        f"topN page by rows x{threshold}": (
            {**base, "metric": "rows"},
            f"SELECT page, count(*) AS n, sum(added), sum(score) FROM {src} GROUP BY page "
            f"ORDER BY n DESC LIMIT {threshold}",
        ),
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--segments", type=int, default=96)
    ap.add_argument("--pages", type=int, default=10_000)
    ap.add_argument("--threshold", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=9)
    args = ap.parse_args(argv)
    report: dict[str, Any] = {**vars(args), "queries": []}
    with cluster() as c:
        began = time.monotonic()
        ds = write_dataset(c.root, "bench", args.rows, args.segments, pages=args.pages)
        c.start_data_nodes(2)
        broker = c.start_broker("--cache", "none")
        wait_for_segments(broker, args.segments, nodes=c.historicals)
        up = time.monotonic() - began
        log(f"{args.rows:,} rows in {args.segments} segments, {args.pages:,} pages; cluster up after "
            f"{up:.1f}s (median [min-max] of {args.repeat}, taking turns):")  # fmt: skip
        conn = duckdb_baseline()
        pids = {"broker": broker.pid, **{f"historical{i}": h.pid for i, h in enumerate(c.historicals)}}
        src = f"read_parquet({ds.parquet_list()})"
        with httpx.Client(timeout=600) as client:
            for name, (body, sql) in cases(ds.name, ds.interval, src, args.threshold).items():
                answer = post_query(client, broker.url, body)[0]["result"]
                expected = conn.execute(sql).fetchall()
                strata, duck, cpu, duck_cpu = [], [], {p: 0.0 for p in pids}, 0.0
                for _ in range(args.repeat):
                    before = {p: cpu_seconds(pid) for p, pid in pids.items()}
                    strata += time_calls(lambda body=body: post_query(client, broker.url, body), 1, warmup=0)
                    for p, pid in pids.items():
                        cpu[p] += (cpu_seconds(pid) - before[p]) / args.repeat
                    own = time.process_time()  # DuckDB's threads are this process's
                    duck += time_calls(lambda sql=sql: conn.execute(sql).fetchall(), 1, warmup=0)
                    duck_cpu += (time.process_time() - own) / args.repeat
                ratio = statistics.median(strata) / statistics.median(duck)
                top_same = [r["page"] for r in answer[:10]] == [r[0] for r in expected[:10]]
                entry = {"query": name, "strata_ms": spread(strata), "duckdb_ms": spread(duck),
                         "ratio": round(ratio, 2), "target": TARGET, "top10_same": top_same,
                         "cpu_ms_per_query": {p: round(v * 1000, 1) for p, v in cpu.items()},
                         "duckdb_cpu_ms": round(duck_cpu * 1000, 1),
                         "cpu_ratio": round(sum(cpu.values()) / duck_cpu, 2)}  # fmt: skip
                report["queries"].append(entry)
                log(f"  {name:26s} strata {entry['strata_ms']:>22s} ms  duckdb {entry['duckdb_ms']:>22s} ms  "
                    f"ratio {ratio:4.2f} (target at most {TARGET})  top 10 same: {top_same}  "
                    f"CPU ms/query {entry['cpu_ms_per_query']} vs DuckDB's {entry['duckdb_cpu_ms']} "
                    f"(CPU ratio {entry['cpu_ratio']})")  # fmt: skip
    print(json.dumps(report))


if __name__ == "__main__":
    main()
