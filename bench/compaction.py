"""Compaction of a day of hourly segments into one day segment, locally and on Spark, with the day's
queries before and after.

    python -m bench.compaction [--rows 3000000] [--engines local,spark] [--master local[2]] [--repeat 5]

For each engine: 24 hourly segments of the synthetic cluster dataset (`bench.cluster_setup`) are
published, one historical (ZooKeeper, replicas 1) and one broker serve them; the day's queries
(`workloads`: count, hourly timeseries, topN, groupBy, filtered groupBy) are timed through the
broker; a `strata coordinator --engine ENGINE` runs a `compact` task to DAY (timed from submit to
SUCCESS, its process start and, on Spark, its session start included; the task's own duration
reported too); once the historical serves the day alone the queries are timed again, and their
answers must equal those before (the same rows, floats within 1e-9). Prints a table and, last,
one JSON line.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bench.cluster_setup import (
    BenchProcess,
    cluster,
    served_segments,
    wait_for_segments,
    workloads,
    write_dataset,
)
from bench.measure import QueryConnection, log, time_calls
from timeline import format_instant

DAY_START = "2020-01-01T00:00:00.000Z"


def _close(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _time_queries(
    url: str, queries: dict[str, dict[str, Any]], repeat: int
) -> tuple[dict[str, float], dict[str, Any]]:
    """Median ms per query, and each answer."""
    conn = QueryConnection(url)
    try:
        answers = {name: conn.post(body) for name, body in queries.items()}
        medians = {name: statistics.median(time_calls(lambda b=body: conn.post(b), repeat)) * 1e3
                   for name, body in queries.items()}  # fmt: skip
    finally:
        conn.close()
    return medians, answers


def _compact(root: Path, c: Any, engine: str, master: str) -> tuple[float, float]:
    """(seconds from submit to SUCCESS, the task's own duration in seconds)."""
    args = ["--deep-storage", str(root / "deep"), "--metadata", str(root / "meta.db"),
            "--task-log-dir", str(root / "task-logs"), "--engine", engine]  # fmt: skip
    if engine == "spark":
        args += ["--spark-master", master]
    env = {"SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    coordinator = BenchProcess("coordinator", args, root / f"coordinator-{engine}.log", env=env)
    coordinator.start(timeout=60)
    try:
        day = {"type": "interval", "interval": "2020-01-01/2020-01-02"}
        body = {"type": "compact", "dataSource": "day", "granularitySpec": {"segmentGranularity": "day"},
                "ioConfig": {"type": "compact", "inputSpec": day}}  # fmt: skip
        began = time.perf_counter()
        task = httpx.post(f"{coordinator.url}/druid/indexer/v1/task", json=body, timeout=30).json()["task"]
        while True:
            status = httpx.get(f"{coordinator.url}/druid/indexer/v1/task/{task}/status", timeout=30).json()[
                "status"
            ]
            if status["statusCode"] != "RUNNING":
                break
            time.sleep(0.1)
        wall = time.perf_counter() - began
        if status["statusCode"] != "SUCCESS":
            raise RuntimeError(f"the compact task failed: {status['errorMsg']}")
        return wall, status["duration"] / 1000
    finally:
        coordinator.stop()


def _wait_for_day(historical: Any, broker: Any, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        served = served_segments(historical)
        seen = httpx.get(broker.url + "/status", timeout=5).json().get("segments", -1)
        if len(served) == 1 and served[0]["interval"].startswith(DAY_START) and seen == 1:
            return
        time.sleep(0.3)
    raise RuntimeError("the historical did not come to serve the compacted day alone")


def run_engine(engine: str, rows: int, repeat: int, master: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="strata-bench-compaction-") as tmp:
        root = Path(tmp)
        ds = write_dataset(root, "day", rows, 24)
        queries = {name: body for name, (body, _) in workloads(ds).items()}
        with cluster(root) as c:
            c.start_data_nodes(count=1)
            broker = c.start_broker()
            wait_for_segments(broker, 24, nodes=c.historicals)
            before, answers = _time_queries(broker.url, queries, repeat)
            wall, task_s = _compact(root, c, engine, master)
            _wait_for_day(c.historicals[0], broker)
            after, answers_after = _time_queries(broker.url, queries, repeat)
    same = {name: _close(answers[name], answers_after[name]) for name in queries}
    if not all(same.values()):
        raise RuntimeError(f"answers changed by the compaction: {[n for n, ok in same.items() if not ok]}")
    return {"engine": engine, "compact_s": round(wall, 2), "task_s": round(task_s, 2),
            "before_ms": {k: round(v, 1) for k, v in before.items()},
            "after_ms": {k: round(v, 1) for k, v in after.items()}}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=3_000_000, help="rows of the day (24 hourly segments)")
    ap.add_argument("--engines", default="local,spark")
    ap.add_argument("--master", default="local[2]", help="Spark master for the Spark engine")
    ap.add_argument("--repeat", type=int, default=5, help="timed runs of each query (medians)")
    args = ap.parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    results = []
    for engine in args.engines.split(","):
        log(f"compaction of {args.rows:,} rows in 24 hourly segments, {engine} engine")
        results.append(run_engine(engine, args.rows, args.repeat, args.master))
    log(f"\n{'engine':8} {'compact (submit to SUCCESS)':>28} {'task':>8}")
    for r in results:
        log(f"{r['engine']:8} {r['compact_s']:27.2f}s {r['task_s']:7.2f}s")
    log(f"\n{'query':34} " + "  ".join(f"{r['engine'] + ' before/after ms':>26}" for r in results))
    for name in results[0]["before_ms"]:
        cells = "  ".join(f"{r['before_ms'][name]:12.1f} / {r['after_ms'][name]:9.1f}" for r in results)
        log(f"{name:34} {cells}")
    measured = format_instant(int(time.time() * 1000))
    print(json.dumps({"rows": args.rows, "segments_before": 24, "measured": measured, "results": results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
