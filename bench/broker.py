"""Broker benchmark (issue 5) against real processes: ZooKeeper, two historicals, `strata broker`.

    python -m bench.broker [--rows 3000000] [--segments 100] [--many 1000] [--repeat 7] [--seconds 8]
                           [--profile]

1. End to end: count over eternity, timeseries (hour), topN (page by added, 10) and groupBy
   (country x channel) over `--rows` rows in `--segments` hourly segments, through the broker (no
   cache; one bare keep-alive HTTP/1.1 connection, as wrk would, so a 1 ms answer is timed as
   the server's), vs DuckDB running the same SQL over the same Parquet files in this process
   (footers cached across queries, as Strata's are). Target: within 2x of DuckDB. Beside the
   wall times, the CPU the broker and each historical spent per query (from /proc) and DuckDB's,
   which other load on a shared machine distorts far less.
2. Broker overhead per segment at `--many` small segments: the same timeseries through the broker,
   minus the same per-segment requests sent straight to the historicals (each node asked for
   exactly the segments it announces, Arrow partials, in parallel, as the broker does), divided by
   the segment count. Target: < 50 us per segment.
3. Throughput with 16 concurrent clients (one httpx.AsyncClient): timeBoundary through the broker
   without cache, and an hourly timeseries served from the cache of a `--cache lru` broker.
   Target: > 300 queries/s.
With --profile, the 1,000-segment query is also run through an in-process broker (same code, HTTP
discovery of the same historicals) under cProfile, and the top functions are printed.
Every figure is a median over `--repeat` runs (the few-ms `count`: at least 60) with [min-max];
ratios come from the same run. Process CPU per query is the mean (/proc counts 10 ms ticks).
Nothing is asserted: the figures are printed, then one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from typing import Any

import httpx
import pyarrow as pa

from bench.cluster_setup import (
    AGGS,
    HOUR_MS,
    START_MS,
    Cluster,
    Dataset,
    cluster,
    duckdb_baseline,
    served_segments,
    wait_for_segments,
    workloads,
    write_dataset,
)
from bench.measure import QueryConnection, cpu_seconds, load_test, log, post_query, spread, time_calls
from strata.wire import ARROW_STREAM
from timeline import format_instant

NO_CACHE = {"useCache": False, "populateCache": False}
CHEAP_QUERY_RUNS = 60


def same_answer(name: str, druid: Any, rows: list[tuple[Any, ...]]) -> bool:
    """A cheap independent check that both sides computed the same thing (totals, top keys)."""
    if name.startswith("count"):
        return druid[0]["result"]["rows"] == rows[0][0]
    if name.startswith("timeseries"):
        return len(druid) == len(rows) and [r["result"]["added"] for r in druid] == [int(r[2]) for r in rows]
    if name.startswith("topN"):
        return [r["page"] for r in druid[0]["result"]] == [r[0] for r in rows]
    ours = sorted((e["event"]["country"], e["event"]["channel"], e["event"]["added"]) for e in druid)
    return ours == sorted((r[0], r[1], int(r[3])) for r in rows)


def end_to_end(
    url: str, ds: Dataset, repeat: int, pids: dict[str, int] | None = None
) -> list[dict[str, Any]]:
    """Each workload through the broker and in DuckDB, taking turns; with `pids` (broker and data
    nodes), also the CPU each process spent per query beside DuckDB's own (this process), which a
    busy shared machine distorts far less than wall time."""
    conn = duckdb_baseline()
    pids = pids or {}
    out = []
    client = QueryConnection(url)
    try:
        for name, (body, sql) in workloads(ds, NO_CACHE).items():
            answer = client.post(body)
            rows = conn.execute(sql).fetchall()
            broker: list[float] = []
            duck: list[float] = []
            cpu: dict[str, list[float]] = {p: [] for p in pids}
            duck_cpu: list[float] = []
            # a few-ms query is timed many more times: one preempted run moves a median of 7
            runs = max(repeat, CHEAP_QUERY_RUNS) if name.startswith("count") else repeat
            for _ in range(runs):  # interleaved: load from other work hits both sides alike
                before = {p: cpu_seconds(pid) for p, pid in pids.items()}
                broker += time_calls(lambda body=body: client.post(body), 1, warmup=0)
                for p, pid in pids.items():
                    cpu[p].append(cpu_seconds(pid) - before[p])
                own = time.process_time()
                duck += time_calls(lambda sql=sql: conn.execute(sql).fetchall(), 1, warmup=0)
                duck_cpu.append(time.process_time() - own)
            ratio = statistics.median(broker) / statistics.median(duck)
            same = same_answer(name, answer, rows)
            # the mean: /proc counts whole clock ticks (10 ms), so a median of few-ms queries is 0 or 10
            cpu_ms = {p: round(statistics.fmean(v) * 1000, 1) for p, v in cpu.items()}
            out.append({"query": name, "broker_ms": spread(broker), "duckdb_ms": spread(duck),
                        "ratio": round(ratio, 2), "same_answer": same, "cpu_ms_per_query": cpu_ms,
                        "duckdb_cpu_ms": round(statistics.median(duck_cpu) * 1000)})  # fmt: skip
            log(f"  {name:26s} broker {spread(broker):>22s} ms  duckdb {spread(duck):>22s} ms  "
                f"ratio {ratio:5.2f}  same answer: {out[-1]['same_answer']}")  # fmt: skip
            if pids:
                shares = "  ".join(f"{p} {v}" for p, v in cpu_ms.items())
                log(f"  {'':26s} CPU ms/query: {shares}  (all {round(sum(cpu_ms.values()), 1)})  "
                    f"duckdb {out[-1]['duckdb_cpu_ms']}")  # fmt: skip
    finally:
        client.close()
    return out


async def _direct(client: httpx.AsyncClient, nodes: list[tuple[str, list[dict[str, Any]]]],
                  body: dict[str, Any]) -> int:  # fmt: skip
    """The broker's fan-out without the broker: each node gets its own segments, Arrow partials back."""
    headers = {"Accept": ARROW_STREAM}

    async def one(url: str, descriptors: list[dict[str, Any]]) -> int:
        req = {**body, "intervals": {"type": "segments", "segments": descriptors}}
        resp = await client.post(url + "/druid/v2/", json=req, headers=headers)
        resp.raise_for_status()
        return pa.ipc.open_stream(resp.content).read_all().num_rows

    counts = await asyncio.gather(*(one(url, d) for url, d in nodes if d))
    return sum(counts)


def _descriptor(segment: dict[str, Any]) -> dict[str, Any]:
    return {"itvl": segment["interval"], "ver": segment["version"],
            "part": segment["shardSpec"].get("partitionNum", 0)}  # fmt: skip


def overhead(c: Cluster, url: str, broker_pid: int, many: Dataset, repeat: int) -> dict[str, Any]:
    body = {"queryType": "timeseries", "dataSource": many.name, "intervals": [many.interval],
            "granularity": "all", "aggregations": AGGS, "context": NO_CACHE}  # fmt: skip
    nodes = [(h.url, [_descriptor(s) for s in served_segments(h) if s["dataSource"] == many.name])
             for h in c.historicals]  # fmt: skip
    covered = sum(len(d) for _, d in nodes)
    broker_cpu: list[float] = []

    async def measure() -> tuple[list[float], list[float], Any]:
        broker: list[float] = []
        direct: list[float] = []
        async with httpx.AsyncClient(timeout=120) as client:
            answer = (await client.post(url + "/druid/v2/", json=body)).json()
            await _direct(client, nodes, body)
            # interleaved, so load from other work on the machine hits both sides alike
            for _ in range(repeat):
                t, cpu = time.perf_counter(), cpu_seconds(broker_pid)
                (await client.post(url + "/druid/v2/", json=body)).raise_for_status()
                broker.append(time.perf_counter() - t)
                broker_cpu.append(cpu_seconds(broker_pid) - cpu)
                t = time.perf_counter()
                await _direct(client, nodes, body)
                direct.append(time.perf_counter() - t)
        return broker, direct, answer

    broker, direct, answer = asyncio.run(measure())
    diff = statistics.median(broker) - statistics.median(direct)
    per_segment_us = diff / many.segments * 1e6
    cpu_us = statistics.median(broker_cpu) / many.segments * 1e6
    log(f"  {many.segments} segments ({covered} announced, rows {answer[0]['result']['rows']}): broker "
        f"{spread(broker)} ms, historicals direct {spread(direct)} ms -> wall difference "
        f"{per_segment_us:.1f} us/segment; broker process CPU {spread(broker_cpu)} ms/query -> "
        f"{cpu_us:.1f} us/segment")  # fmt: skip
    return {"segments": many.segments, "broker_ms": spread(broker), "direct_ms": spread(direct),
            "wall_overhead_us_per_segment": round(per_segment_us, 1), "broker_cpu_ms": spread(broker_cpu),
            "broker_cpu_us_per_segment": round(cpu_us, 1)}  # fmt: skip


def throughput(url: str, cached_url: str, ds: Dataset, seconds: float, concurrency: int) -> dict[str, Any]:
    out = {}
    tb = {"queryType": "timeBoundary", "dataSource": ds.name, "context": NO_CACHE}
    ts = {"queryType": "timeseries", "dataSource": ds.name, "intervals": [ds.interval], "granularity": "hour",
          "aggregations": AGGS}  # fmt: skip
    cases = (("timeBoundary (no cache)", url, tb), ("timeseries hour (LRU cached)", cached_url, ts))
    for name, target, body in cases:
        with httpx.Client() as client:
            post_query(client, target, body)  # fills the cache for the cached case
        result = load_test(target, body, concurrency, seconds)
        log(f"  {name:30s} {result.row()}")
        out[name] = result.summary()
    return out


def profile_in_process(c: Cluster, label: str, body: dict[str, Any], segments: int, repeat: int,
                       *cache_args: str) -> None:  # fmt: skip
    """cProfile of the real broker code (app + runner) in this process, HTTP discovery of the nodes."""
    import cProfile
    import pstats

    from broker_service.app import create_app
    from broker_service.build import build_broker
    from broker_service.cli import configure

    parser = argparse.ArgumentParser()
    configure(parser)
    nodes = ",".join(h.address for h in c.historicals)
    args = parser.parse_args(["--discovery", "http", "--nodes", nodes, *cache_args])
    broker = build_broker(args)
    app = create_app(broker)

    async def run() -> None:
        await broker.start()
        try:
            deadline = time.monotonic() + 60
            while broker.view.segment_count < segments and time.monotonic() < deadline:  # noqa: ASYNC110
                await asyncio.sleep(0.2)
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://broker") as client:
                await client.post("/druid/v2/", json=body)
                profiler = cProfile.Profile()
                began = time.perf_counter()
                profiler.enable()
                for _ in range(repeat):
                    resp = await client.post("/druid/v2/", json=body)
                    resp.raise_for_status()
                profiler.disable()
                per_query_ms = (time.perf_counter() - began) / repeat * 1e3
                log(f"  in-process broker, {label}: {per_query_ms:.2f} ms/query "
                    f"(under cProfile, {repeat} queries)")  # fmt: skip
                stats = pstats.Stats(profiler)
                stats.sort_stats("tottime").print_stats(18)
                stats.sort_stats("cumulative").print_stats(30)
        finally:
            await broker.stop()

    asyncio.run(run())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=3_000_000)
    parser.add_argument("--segments", type=int, default=100)
    parser.add_argument("--many", type=int, default=1000, help="segments of the small-segment datasource")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--seconds", type=float, default=8.0, help="length of each throughput run")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--segment-cache-format", choices=["arrow", "parquet"], default="arrow",
                        help="what the historicals' queries read (their option of that name)")  # fmt: skip
    args = parser.parse_args(argv)

    report: dict[str, Any] = {"rows": args.rows, "segments": args.segments}
    with cluster() as c:
        began = time.monotonic()
        ds = write_dataset(c.root, "bench", args.rows, args.segments)
        many = write_dataset(c.root, "many", args.many * 200, args.many, seed=11)
        log(f"data: {args.rows:,} rows in {args.segments} segments + {many.rows:,} rows in {many.segments} "
            f"segments, written in {time.monotonic() - began:.1f}s")  # fmt: skip
        c.start_data_nodes(2, args.segment_cache_format)
        broker = c.start_broker("--cache", "none")
        cached = c.start_broker("--cache", "lru", "--cache-size", str(512 * 1024 * 1024))
        for b in (broker, cached):
            wait_for_segments(b, args.segments + args.many, nodes=c.historicals)
        log(f"cluster up: ZooKeeper, 2 historicals, 2 brokers after {time.monotonic() - began:.1f}s")
        log(f"end to end vs DuckDB over the same Parquet files (median [min-max] of {args.repeat}):")
        pids = {"broker": broker.pid, **{f"historical{i}": h.pid for i, h in enumerate(c.historicals)}}
        report["end_to_end"] = end_to_end(broker.url, ds, args.repeat, pids)
        log("broker overhead per segment:")
        report["overhead"] = overhead(c, broker.url, broker.pid, many, args.repeat)
        log(f"throughput, {args.concurrency} concurrent clients, {args.seconds:.0f}s each:")
        report["throughput"] = throughput(broker.url, cached.url, ds, args.seconds, args.concurrency)
        if args.profile:
            total = args.segments + args.many
            body = {"queryType": "timeseries", "dataSource": many.name, "intervals": [many.interval],
                    "granularity": "all", "aggregations": AGGS, "context": NO_CACHE}  # fmt: skip
            profile_in_process(c, f"{many.segments} segments, no cache", body, total, args.repeat)
            one_hour = f"{format_instant(START_MS)}/{format_instant(START_MS + HOUR_MS)}"
            small = {"queryType": "timeseries", "dataSource": ds.name, "intervals": [one_hour],
                     "granularity": "all", "aggregations": AGGS}  # fmt: skip
            profile_in_process(c, "1 segment, LRU cached", small, total, 300, "--cache", "lru")
    print(json.dumps(report))


if __name__ == "__main__":
    main()
