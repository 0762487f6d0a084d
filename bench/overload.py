"""Many users sending heavy statements at once (issue 36, item 5): do cheap queries keep their
latency, does the broker refuse what it cannot run (429), and does memory stay bounded?

    python -m bench.overload [--heavy-clients 50] [--seconds 30] [--heavy groupby,crossjoin]
                             [--scenarios hilo,unlaned] [--max-concurrent 8] [--low-percent 25]

One cluster over the wikipedia sample plus a dataset of ~100,000 (country, page) groups. First the
cheap queries alone (a timeseries and a topN over one hour, a filtered SQL count; one client, back
to back) for a baseline. Then, per scenario, `--heavy-clients` threads send heavy statements in a
loop - groupBys of ~100k groups, and SQL cross joins - while the same cheap loop runs again:

- `hilo`: heavy statements carry context `priority: -1`, as Druid's operators have BI tools and
  batch jobs mark theirs; the broker runs `--laning hilo`, so they share a capped lane `low`.
- `unlaned`: the same statements without a priority, capped only by the total capacity.

A heavy client that is refused (429) waits 100 ms and sends again, as a polite client would. The
report gives cheap-query p50/p90/p99 under load against the baseline (the target: p50 and p90
within 2x), the heavy statements' statuses, and broker and historical peak memory. Timings on a
shared 2-core machine are noisy; run it on a quiet one for figures worth quoting. A JSON line ends
the output.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

from bench.cluster_setup import HOUR_MS, START_MS, write_dataset
from bench.measure import log, percentile
from bench.wiki_cluster import wikipedia_cluster
from harness.memory import MemoryWatchdog, server_pids
from timeline import format_instant

HOUR = "2015-09-12T10:00:00Z/2015-09-12T11:00:00Z"
CHEAP: list[tuple[str, dict[str, Any]]] = [
    ("/druid/v2/", {"queryType": "timeseries", "dataSource": "wikipedia", "intervals": [HOUR],
                    "granularity": "all", "aggregations": [{"type": "count", "name": "c"}]}),
    ("/druid/v2/", {"queryType": "topN", "dataSource": "wikipedia", "intervals": [HOUR], "granularity": "all",
                    "dimension": "channel", "metric": "c", "threshold": 5,
                    "aggregations": [{"type": "count", "name": "c"}]}),
    ("/druid/v2/sql", {"query": "SELECT COUNT(*) AS c FROM wikipedia WHERE channel = '#en.wikipedia' "
                                "AND __time >= TIMESTAMP '2015-09-12 10:00:00' "
                                "AND __time < TIMESTAMP '2015-09-12 11:00:00'"}),
]  # fmt: skip
GROUPS_ROWS = 400_000


def heavy_statements(kinds: list[str], dataset: str, interval: str) -> list[tuple[str, dict[str, Any]]]:
    out: list[tuple[str, dict[str, Any]]] = []
    if "groupby" in kinds:
        out.append(
            (
                "/druid/v2/",
                {
                    "queryType": "groupBy",
                    "dataSource": dataset,
                    "intervals": [interval],
                    "granularity": "all",
                    "dimensions": ["country", "page"],
                    "aggregations": [
                        {"type": "count", "name": "c"},
                        {"type": "longSum", "name": "a", "fieldName": "added"},
                    ],
                },
            )
        )
    if "crossjoin" in kinds:
        out += [
            ("/druid/v2/sql", {"query": "SELECT * FROM wikipedia, wikipedia, wikipedia"}),
            ("/druid/v2/sql", {"query": "SELECT COUNT(*) AS n FROM wikipedia a, wikipedia b"}),
        ]
    return out  # fmt: skip


def with_context(body: dict[str, Any], **context: Any) -> dict[str, Any]:
    return {**body, "context": {**body.get("context", {}), **context}}


def cheap_loop(url: str, seconds: float, statuses: Counter[str] | None = None) -> list[float]:
    """Back-to-back cheap queries for `seconds`; the latency of each answered one (statuses counted)."""
    latencies: list[float] = []
    deadline = time.monotonic() + seconds
    with httpx.Client(timeout=120) as client:
        while time.monotonic() < deadline:
            for path, body in CHEAP:
                started = time.perf_counter()
                resp = client.post(url + path, json=body)
                if statuses is not None:
                    statuses[str(resp.status_code)] += 1
                if resp.status_code == 200:
                    latencies.append(time.perf_counter() - started)
    return latencies


def heavy_load(url: str, statements: list[tuple[str, dict[str, Any]]], clients: int, stop: threading.Event,
               statuses: Counter[str], lock: threading.Lock) -> list[threading.Thread]:  # fmt: skip
    def client_loop(i: int) -> None:
        with httpx.Client(timeout=300) as client:
            n = i
            while not stop.is_set():
                path, body = statements[n % len(statements)]
                n += 1
                try:
                    status = str(client.post(url + path, json=body).status_code)
                except httpx.HTTPError as e:
                    status = type(e).__name__
                with lock:
                    statuses[status] += 1
                if status == "429":
                    stop.wait(0.1)

    threads = [threading.Thread(target=client_loop, args=(i,), daemon=True) for i in range(clients)]
    for t in threads:
        t.start()
    return threads


def summary(latencies: list[float]) -> dict[str, float]:
    if not latencies:
        return {"n": 0, "p50_ms": float("nan"), "p90_ms": float("nan"), "p99_ms": float("nan")}
    return {
        "n": len(latencies),
        **{f"p{q}_ms": round(percentile(latencies, q / 100) * 1000, 1) for q in (50, 90, 99)},
    }


def scenario(url: str, name: str, statements: list[tuple[str, dict[str, Any]]], args: argparse.Namespace,
             watchdog: MemoryWatchdog, baseline: dict[str, float]) -> dict[str, Any]:  # fmt: skip
    context: dict[str, Any] = {"timeout": 60_000}
    if name == "hilo":
        context["priority"] = -1
    marked = [(path, with_context(body, **context)) for path, body in statements]
    statuses: Counter[str] = Counter()
    stop, lock = threading.Event(), threading.Lock()
    log(f"scenario {name}: {args.heavy_clients} heavy clients for {args.seconds}s")
    threads = heavy_load(url, marked, args.heavy_clients, stop, statuses, lock)
    time.sleep(2)  # the flood fills the lanes and the queue first
    cheap_statuses: Counter[str] = Counter()
    loaded = summary(cheap_loop(url, args.seconds, cheap_statuses))
    stop.set()
    for t in threads:
        t.join(timeout=320)
    ratio = {q: round(loaded[q] / baseline[q], 2) for q in ("p50_ms", "p90_ms")}
    health = httpx.get(url + "/status/health", timeout=10).status_code
    return {"cheap_under_load": loaded, "cheap_statuses": dict(cheap_statuses), "ratio_to_baseline": ratio,
            "heavy_statuses": dict(statuses),
            "broker_health_after": health, "memory_mb_so_far": watchdog.summary()}  # fmt: skip


def groups_dataset(root: Any) -> int:
    ds = write_dataset(root, "groups", GROUPS_ROWS, 4, pages=200_000)
    return ds.segments


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--heavy-clients", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--heavy", default="groupby,crossjoin", help="heavy kinds: groupby, crossjoin")
    parser.add_argument("--scenarios", default="hilo,unlaned")
    parser.add_argument("--max-concurrent", type=int, default=8)
    parser.add_argument("--queue", type=int, default=16)
    parser.add_argument("--low-percent", type=int, default=25)
    parser.add_argument("--keep", type=Path, default=None, help="run the cluster in DIR and keep it (logs)")
    args = parser.parse_args()
    flags = ["--max-concurrent-queries", str(args.max_concurrent), "--query-queue", str(args.queue),
             "--laning", "hilo", "--laning-max-low-percent", str(args.low_percent)]  # fmt: skip
    report: dict[str, Any] = {"flags": flags, "heavy_clients": args.heavy_clients, "seconds": args.seconds}
    with wikipedia_cluster(flags, more_data=groups_dataset, keep=args.keep) as c:
        broker = c.brokers[0]
        interval = f"{format_instant(START_MS)}/{format_instant(START_MS + 4 * HOUR_MS)}"
        statements = heavy_statements(args.heavy.split(","), "groups", interval)
        groups = _group_count(broker.url, interval)
        report["heavy_groupby_groups"] = groups
        pids = server_pids(broker.pid, [h.pid for h in c.historicals])
        with MemoryWatchdog(pids) as watchdog:
            cheap_loop(broker.url, 3)  # warm
            baseline = summary(cheap_loop(broker.url, args.seconds))
            report["cheap_baseline"] = baseline
            log(f"baseline {baseline}")
            for name in args.scenarios.split(","):
                report[name] = scenario(broker.url, name, statements, args, watchdog, baseline)
                log(f"{name}: {json.dumps(report[name])}")
                time.sleep(3)
        report["memory_mb"] = watchdog.summary()
    log(json.dumps(report, indent=1))
    print(json.dumps(report))


def _group_count(url: str, interval: str) -> int:
    body = {"query": "SELECT COUNT(*) AS n FROM (SELECT country, page FROM groups GROUP BY 1, 2)"}
    resp = httpx.post(url + "/druid/v2/sql", json=body, timeout=300)
    rows: list[dict[str, int]] = resp.json() if resp.status_code == 200 else [{"n": -1}]
    return rows[0]["n"]


if __name__ == "__main__":
    main()
