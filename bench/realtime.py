"""Real-time node: durable push throughput and query latency over live rows (issue 14).

    python -m bench.realtime [--rows 1000000] [--hours 1] [--batch 1000] [--pushers 4] [--repeat 9]

Starts a real `strata realtime` process (no ZooKeeper) and pushes `--rows` events in batches of
`--batch` from `--pushers` concurrent producers (each its own producer id and sequence numbers);
a batch counts once its answer came back, i.e. once it was fsynced in the write-ahead log and
applied. Bodies are encoded before the clock starts. Then the same queries run against the node
over the live segments and against DuckDB over the same rows held in memory (an Arrow table), as
medians of `--repeat` interleaved runs. Nothing is asserted; the figures are printed as JSON too.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import duckdb
import httpx
import numpy as np
import orjson
import pyarrow as pa

from harness.processes import StrataProcess, running

DS = "bench"
HOUR_MS = 3_600_000
START_MS = 1_735_689_600_000  # 2025-01-01T00:00:00Z


def spec(max_rows: int) -> dict[str, Any]:
    return {
        "dataSchema": {
            "dataSource": DS,
            "timestampSpec": {"column": "ts", "format": "millis"},
            "dimensionsSpec": {"dimensions": ["page", "country"]},
            "metricsSpec": [
                {"type": "count", "name": "count"},
                {"type": "longSum", "name": "added", "fieldName": "added"},
            ],
            "granularitySpec": {"segmentGranularity": "hour", "queryGranularity": "none", "rollup": False},
        },
        "tuningConfig": {
            "rejectionPolicy": {"type": "none"},
            "maxRowsInMemory": max_rows,
            "intermediatePersistPeriod": "PT1H",
        },
    }


def make_events(n: int, hours: int = 1, seed: int = 7) -> pa.Table:
    rng = np.random.default_rng(seed)
    return pa.table(
        {
            "ts": START_MS + rng.integers(0, hours * HOUR_MS, n),
            "page": pa.array([f"page-{i}" for i in rng.zipf(1.3, n) % 5000]),
            "country": pa.array([f"c{i}" for i in rng.integers(0, 40, n)]),
            "added": rng.integers(0, 1000, n),
        }
    )


def bodies(events: pa.Table, batch: int) -> list[bytes]:
    rows = events.to_pylist()
    return [orjson.dumps(rows[i : i + batch]) for i in range(0, len(rows), batch)]


def push_all(node: StrataProcess, batches: list[bytes], pushers: int) -> tuple[float, int]:
    """Seconds until every batch was acknowledged, and how many 429/503 answers were retried."""
    retries = [0]
    lock = threading.Lock()

    def pusher(p: int) -> None:
        with httpx.Client(timeout=60) as client:
            for seq, i in enumerate(range(p, len(batches), pushers)):
                headers = {"X-Strata-Producer-Id": f"bench-{p}", "X-Strata-Producer-Seq": str(seq)}
                while True:
                    resp = client.post(f"{node.url}/v1/push/{DS}", content=batches[i], headers=headers)
                    if resp.status_code == 200:
                        break
                    if resp.status_code not in (429, 503):
                        raise RuntimeError(resp.text)
                    with lock:
                        retries[0] += 1
                    time.sleep(0.05)

    threads = [threading.Thread(target=pusher, args=(p,)) for p in range(pushers)]
    began = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - began, retries[0]


QUERIES: dict[str, tuple[dict[str, Any], str]] = {
    "timeseries hour": (
        {
            "queryType": "timeseries",
            "granularity": "hour",
            "aggregations": [
                {"type": "longSum", "name": "n", "fieldName": "count"},
                {"type": "longSum", "name": "added", "fieldName": "added"},
            ],
        },
        "SELECT ts // 3600000, count(*), sum(added) FROM ev GROUP BY 1 ORDER BY 1",
    ),
    "topN page x10": (
        {
            "queryType": "topN",
            "granularity": "all",
            "dimension": "page",
            "metric": "added",
            "threshold": 10,
            "aggregations": [{"type": "longSum", "name": "added", "fieldName": "added"}],
        },
        "SELECT page, sum(added) s FROM ev GROUP BY 1 ORDER BY s DESC LIMIT 10",
    ),
    "groupBy country": (
        {
            "queryType": "groupBy",
            "granularity": "all",
            "dimensions": ["country"],
            "aggregations": [{"type": "longSum", "name": "n", "fieldName": "count"}],
        },
        "SELECT country, count(*) FROM ev GROUP BY 1",
    ),
}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--hours", type=int, default=1, help="hours the events span (one live segment each)")
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--pushers", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--max-rows-in-memory", type=int, default=150_000)
    args = parser.parse_args(argv)
    events = make_events(args.rows, args.hours)
    batches = bodies(events, args.batch)
    report: dict[str, Any] = {
        "rows": args.rows,
        "hours": args.hours,
        "batch": args.batch,
        "pushers": args.pushers,
    }
    with tempfile.TemporaryDirectory(prefix="strata-bench-rt-") as tmp:
        root = Path(tmp)
        (root / "spec.json").write_text(json.dumps(spec(args.max_rows_in_memory)))
        node = StrataProcess(
            "realtime",
            [
                "--spec",
                str(root / "spec.json"),
                "--base-dir",
                str(root / "base"),
                "--deep-storage",
                str(root / "deep"),
                "--metadata",
                str(root / "meta.db"),
            ],
            root / "realtime.log",
        )
        with running([node]):
            node.start()
            seconds, retries = push_all(node, batches, args.pushers)
            ingestion = httpx.get(f"{node.url}/status", timeout=10).json()["strata"]["ingestion"]
            wal = ingestion["wal"]
            report["push"] = {
                "seconds": round(seconds, 3),
                "eventsPerSecond": round(args.rows / seconds),
                "batchesPerSecond": round(len(batches) / seconds, 1),
                "retried429or503": retries,
                "fsyncs": wal["syncs"],
                "batchesPerFsync": round(wal["records"] / max(wal["syncs"], 1), 2),
                "fsyncMsPerBatch": round(1000 * wal["syncSeconds"] / max(wal["records"], 1), 3),
                "fsyncMsPerSync": round(1000 * wal["syncSeconds"] / max(wal["syncs"], 1), 3),
                "persists": ingestion["persists"],
                "rowsInMemory": ingestion["rowsInMemory"],
            }
            print(
                f"push: {args.rows:,} events, batches of {args.batch}, {args.pushers} pushers: "
                f"{report['push']['eventsPerSecond']:,} events/s durably acknowledged",
                file=sys.stderr,
            )
            conn = duckdb.connect()
            conn.register("ev", events)
            report["queries"] = {}
            with httpx.Client(timeout=60) as client:
                for name, (body, sql) in QUERIES.items():
                    full = {**body, "dataSource": DS, "intervals": ["2025-01-01/2025-01-02"]}
                    node_ms, duck_ms = [], []
                    for _ in range(args.repeat):
                        began = time.perf_counter()
                        resp = client.post(f"{node.url}/druid/v2/", json=full)
                        node_ms.append(1000 * (time.perf_counter() - began))
                        assert resp.status_code == 200, resp.text
                        began = time.perf_counter()
                        conn.execute(sql).fetchall()
                        duck_ms.append(1000 * (time.perf_counter() - began))
                    med_node, med_duck = statistics.median(node_ms), statistics.median(duck_ms)
                    report["queries"][name] = {
                        "realtimeMs": round(med_node, 2),
                        "duckdbMs": round(med_duck, 2),
                        "ratio": round(med_node / med_duck, 2),
                    }
                    print(
                        f"{name}: realtime {med_node:.1f} ms, DuckDB in memory {med_duck:.1f} ms",
                        file=sys.stderr,
                    )
    print(json.dumps(report))  # one line: `python -m bench` reads the last JSON line


if __name__ == "__main__":
    main()
