"""Shared pieces of the real-time tests: a spec file, a real `strata realtime` process, pushes, and
the expected answers computed in plain Python over the pushed events (never by the engine)."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

from harness.processes import StrataProcess

DS = "events"
START = datetime(2025, 1, 1, tzinfo=UTC)


def write_spec(root: Path, *, policy: str = "none", rollup: bool = False, max_rows: int = 150_000,
               window: str = "PT10M", query_granularity: str = "none") -> Path:  # fmt: skip
    spec = {
        "type": "index_realtime",
        "spec": {
            "dataSchema": {
                "dataSource": DS,
                "timestampSpec": {"column": "ts", "format": "iso"},
                "dimensionsSpec": {"dimensions": ["k"]},
                "metricsSpec": [{"type": "count", "name": "count"}, {"type": "longSum", "name": "n", "fieldName": "n"}],
                "granularitySpec": {"segmentGranularity": "hour", "queryGranularity": query_granularity,
                                    "rollup": rollup},
            },
            "tuningConfig": {"type": "realtime", "rejectionPolicy": {"type": policy}, "windowPeriod": window,
                             "maxRowsInMemory": max_rows},
        },
    }  # fmt: skip
    path = root / "spec.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(spec))
    return path


def realtime(root: Path, spec: Path, *extra: str, zk: str | None = None, zk_base: str | None = None,
             name: str = "realtime") -> StrataProcess:  # fmt: skip
    args = ["--spec", str(spec), "--base-dir", str(root / "rt-base"), "--deep-storage", str(root / "deep"),
            "--metadata", str(root / "meta.db"), "--drop-delay", "1", *extra]  # fmt: skip
    if zk:
        args += ["--zk", zk, "--zk-base", zk_base or "/druid"]
    return StrataProcess("realtime", args, root / f"{name}.log")


def events(n: int, offset: int = 0, hours: int = 3, keys: int = 7) -> list[dict[str, Any]]:
    """`n` events spread over `hours` hours from START (a fixed, long-past day)."""
    out = []
    for i in range(offset, offset + n):
        ts = START + timedelta(seconds=(i * 37) % (hours * 3600))
        out.append({"ts": ts.strftime("%Y-%m-%dT%H:%M:%S.000Z"), "k": f"k{i % keys}", "n": i % 100})
    return out


def push(node: StrataProcess, rows: Sequence[Any], producer: str | None = None, seq: int | None = None,
         *, ndjson: bool = False, firehose: bool = False, timeout: float = 30) -> httpx.Response:  # fmt: skip
    headers = {"Content-Type": "application/json"}
    prefix = "X-Firehose-Producer" if firehose else "X-Strata-Producer"
    if producer is not None:
        headers[f"{prefix}-Id"] = producer
    if seq is not None:
        headers[f"{prefix}-Seq"] = str(seq)
    body = "\n".join(json.dumps(r) for r in rows) if ndjson else json.dumps(list(rows))
    return httpx.post(f"{node.url}/v1/push/{DS}", content=body.encode(), headers=headers, timeout=timeout)


def hourly(rows: Sequence[dict[str, Any]]) -> list[tuple[str, int, int]]:
    """(hour, events, sum of n) per hour holding events: the oracle for an hourly timeseries."""
    out: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for r in rows:
        hour = r["ts"][:13] + ":00:00.000Z"
        out[hour][0] += 1
        out[hour][1] += r["n"]
    return [(h, c, s) for h, (c, s) in sorted(out.items())]


def by_key(rows: Sequence[dict[str, Any]]) -> dict[str, tuple[int, int]]:
    out: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for r in rows:
        out[r["k"]][0] += 1
        out[r["k"]][1] += r["n"]
    return {k: (c, s) for k, (c, s) in out.items()}


INTERVAL = "2025-01-01/2025-01-02"


def timeseries_body(interval: str = INTERVAL, **context: Any) -> dict[str, Any]:
    return {"queryType": "timeseries", "dataSource": DS, "intervals": [interval], "granularity": "hour",
            "aggregations": [{"type": "longSum", "name": "events", "fieldName": "count"},
                             {"type": "longSum", "name": "n", "fieldName": "n"}],
            "context": {"skipEmptyBuckets": True, **context}}  # fmt: skip


def groupby_body(interval: str = INTERVAL) -> dict[str, Any]:
    return {"queryType": "groupBy", "dataSource": DS, "intervals": [interval], "granularity": "all",
            "dimensions": ["k"], "aggregations": [{"type": "longSum", "name": "events", "fieldName": "count"},
                                                  {"type": "longSum", "name": "n", "fieldName": "n"}]}  # fmt: skip


def ask(node: StrataProcess, body: dict[str, Any]) -> Any:
    resp = httpx.post(f"{node.url}/druid/v2/", json=body, timeout=60)
    assert resp.status_code == 200, resp.text
    return resp.json()


def hourly_answer(
    node: StrataProcess, interval: str = INTERVAL, **context: Any
) -> list[tuple[str, int, int]]:
    return [(r["timestamp"], r["result"]["events"], r["result"]["n"])
            for r in ask(node, timeseries_body(interval, **context))]  # fmt: skip


def key_answer(node: StrataProcess, interval: str = INTERVAL) -> dict[str, tuple[int, int]]:
    return {
        r["event"]["k"]: (r["event"]["events"], r["event"]["n"]) for r in ask(node, groupby_body(interval))
    }


def status(node: StrataProcess) -> dict[str, Any]:
    return dict(httpx.get(f"{node.url}/status", timeout=10).json()["strata"])
