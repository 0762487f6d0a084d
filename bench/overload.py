"""Many users sending heavy statements at once (issue 36, item 5): do cheap queries keep their
latency, does the broker refuse what it cannot run (429), and does memory stay bounded?

    python -m bench.overload [--heavy-clients 50] [--seconds 30] [--heavy groupby,crossjoin]
                             [--scenarios hilo,unlaned] [--backoff retry-after,none]
                             [--max-concurrent 8] [--low-percent 25] [--broker-flag FLAG]... [--profile DIR]

One cluster over the wikipedia sample plus a dataset of ~100,000 (country, page) groups. First the
cheap queries alone (a timeseries and a topN over one hour, a filtered SQL count; one client, back
to back) for a baseline. Then, per scenario, `--heavy-clients` threads send heavy statements in a
loop - groupBys of ~100k groups, and SQL cross joins - while the same cheap loop runs again:

- `hilo`: heavy statements carry context `priority: -1`, as Druid's operators have BI tools and
  batch jobs mark theirs; the broker runs `--laning hilo`, so they share a capped lane `low`.
- `unlaned`: the same statements without a priority, capped only by the total capacity.

The heavy clients run in a process of their own, so the cheap client's timings are not its
interpreter's wait for the heavy threads. Beside the latencies the report gives what tells where the
time goes (bench.overload_probes): each server's event-loop lag (its `/status/health` latency),
the broker's admitted queries and busy SQL engine slots, CPU seconds per process and per kind of
thread beside its nice value (`thread_cpu_s`: which work ran at nice 0 beside the low lane), the
load average, and with `--profile DIR` py-spy's stacks of the broker per thread. `--broker-flag`
passes more flags to the broker (A/B runs, e.g. `--broker-flag=--low-priority-nice --broker-flag=0`,
`--broker-flag=--switch-interval-ms --broker-flag=5`).

A heavy client that is refused (429) sends again after `--backoff`: `retry-after` waits what the
answer's `Retry-After` header says (100 ms when it has none), as a polite client would; `none` sends
again at once, as a naive one would. Each scenario runs once per backoff given (`hilo/none`). The
report gives cheap-query p50/p90/p99 under load against the baseline (the target: p50 and p90
within 2x), the heavy statements' statuses, and broker and historical peak memory. Timings on a
shared 2-core machine are noisy; run it on a quiet one for figures worth quoting. A JSON line ends
the output.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

from bench.cluster_setup import HOUR_MS, START_MS, write_dataset
from bench.measure import log
from bench.overload_probes import Probes, by_thread, latency_summary, record
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


def heavy_load(url: str, statements: list[tuple[str, dict[str, Any]]], clients: int, backoff: str, stop: Any,
               out: Any) -> None:  # fmt: skip
    """In a process of its own (its threads would otherwise hold the cheap client's interpreter lock
    and show in its latencies): `clients` threads send `statements` until `stop` is set, then their
    statuses go to the queue `out`; after a 429 each waits as `backoff` says."""
    statuses: Counter[str] = Counter()
    lock = threading.Lock()
    done = threading.Event()

    def client_loop(i: int) -> None:
        with httpx.Client(timeout=300) as client:
            n = i
            while not done.is_set():
                path, body = statements[n % len(statements)]
                n += 1
                wait = 0.0
                try:
                    resp = client.post(url + path, json=body)
                    status = str(resp.status_code)
                    if status == "429" and backoff == "retry-after":
                        wait = float(resp.headers.get("retry-after", 0.1))
                except httpx.HTTPError as e:
                    status = type(e).__name__
                with lock:
                    statuses[status] += 1
                if wait:
                    done.wait(wait)

    threads = [threading.Thread(target=client_loop, args=(i,), daemon=True) for i in range(clients)]
    for t in threads:
        t.start()
    stop.wait()
    done.set()
    for t in threads:
        t.join(timeout=320)
    out.put(dict(statuses))


def scenario(url: str, name: str, backoff: str, statements: list[tuple[str, dict[str, Any]]],
             args: argparse.Namespace, watchdog: MemoryWatchdog, baseline: dict[str, float],
             probes: Probes) -> dict[str, Any]:  # fmt: skip
    context: dict[str, Any] = {"timeout": 60_000}
    if name == "hilo":
        context["priority"] = -1
    marked = [(path, with_context(body, **context)) for path, body in statements]
    spawn = multiprocessing.get_context("spawn")
    stop, out = spawn.Event(), spawn.Queue()
    log(f"scenario {name}/{backoff}: {args.heavy_clients} heavy clients for {args.seconds}s")
    heavy = spawn.Process(target=heavy_load, args=(url, marked, args.heavy_clients, backoff, stop, out),
                          daemon=True)  # fmt: skip
    heavy.start()
    probes.pids["heavy-clients"] = heavy.pid or 0
    time.sleep(2)  # the flood fills the lanes and the queue first
    cheap_statuses: Counter[str] = Counter()
    stem = f"{name}-{backoff}"
    recordings = [] if args.profile is None else [(args.profile / f"{stem}.txt", False),
                                                  (args.profile / f"{stem}.gil.txt", True)]  # fmt: skip
    spies = [(record(probes.pids["broker"], args.seconds, path, gil=gil), path) for path, gil in recordings]
    with probes:
        loaded = latency_summary(cheap_loop(url, args.seconds, cheap_statuses))
    profile = {path.name: _profile(spy, path, args.seconds) for spy, path in spies}
    stop.set()
    statuses = out.get(timeout=330)
    heavy.join(timeout=10)
    ratio = {q: round(loaded[q] / baseline[q], 2) for q in ("p50_ms", "p90_ms")}
    health = httpx.get(url + "/status/health", timeout=10).status_code
    summary = probes.summary()
    # the broker's CPU per request it answered in the cheap loop's window (heavy statuses are counted
    # over the heavy clients' whole run, a few seconds longer: an estimate)
    handled = sum(statuses.values()) + sum(cheap_statuses.values())
    broker_ms = summary["cpu_s"].get("broker", 0.0) * 1000
    rates = {
        "heavy_429_per_s": round(statuses.get("429", 0) / (args.seconds + 2), 1),
        "broker_cpu_ms_per_request": round(broker_ms / max(1, handled), 3),
    }
    return {"cheap_under_load": loaded, "cheap_statuses": dict(cheap_statuses), "ratio_to_baseline": ratio,
            "heavy_statuses": dict(statuses), **rates, **summary, "broker_profile": profile,
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
    parser.add_argument("--backoff", default="retry-after",
                        help="after a 429, heavy clients wait what Retry-After says (retry-after) or not "
                        "at all (none); a list runs each scenario once per backoff")  # fmt: skip
    parser.add_argument("--max-concurrent", type=int, default=8)
    parser.add_argument("--queue", type=int, default=16)
    parser.add_argument("--low-percent", type=int, default=25)
    parser.add_argument("--broker-flag", action="append", default=[], metavar="FLAG",
                        help="one more broker argument, repeatable (--broker-flag=--release-memory-seconds "
                        "--broker-flag=0)")  # fmt: skip
    parser.add_argument(
        "--profile",
        type=Path,
        default=None,
        metavar="DIR",
        help="record the broker with py-spy per scenario (stacks per thread, in DIR)",
    )
    parser.add_argument("--keep", type=Path, default=None, help="run the cluster in DIR and keep it (logs)")
    args = parser.parse_args()
    flags = ["--max-concurrent-queries", str(args.max_concurrent), "--query-queue", str(args.queue),
             "--laning", "hilo", "--laning-max-low-percent", str(args.low_percent),
             *args.broker_flag]  # fmt: skip
    if args.profile is not None:
        args.profile.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {"flags": flags, "heavy_clients": args.heavy_clients, "seconds": args.seconds}
    with wikipedia_cluster(flags, more_data=groups_dataset, keep=args.keep) as c:
        broker = c.brokers[0]
        interval = f"{format_instant(START_MS)}/{format_instant(START_MS + 4 * HOUR_MS)}"
        statements = heavy_statements(args.heavy.split(","), "groups", interval)
        groups = _group_count(broker.url, interval)
        report["heavy_groupby_groups"] = groups
        pids = server_pids(broker.pid, [h.pid for h in c.historicals])
        with MemoryWatchdog(pids) as watchdog:
            servers = {"broker": broker.url, **{f"historical{i}": h.url for i, h in enumerate(c.historicals)}}
            cheap_loop(broker.url, 3)  # warm
            with Probes(servers, broker.url, pids) as probes:
                baseline = latency_summary(cheap_loop(broker.url, args.seconds))
            report["cheap_baseline"] = {**baseline, **probes.summary()}
            log(f"baseline {report['cheap_baseline']}")
            backoffs = args.backoff.split(",")
            for name in args.scenarios.split(","):
                for backoff in backoffs:
                    key = name if len(backoffs) == 1 else f"{name}/{backoff}"
                    probes = Probes(servers, broker.url, pids)
                    report[key] = scenario(broker.url, name, backoff, statements, args, watchdog, baseline,
                                           probes)  # fmt: skip
                    log(f"{key}: {json.dumps(report[key])}")
                    time.sleep(3)
        report["memory_mb"] = watchdog.summary()
    log(json.dumps(report, indent=1))
    print(json.dumps(report))


def _profile(spy: subprocess.Popen[bytes], out: Path, seconds: float) -> dict[str, Any] | None:
    try:
        spy.wait(timeout=60)
    except subprocess.TimeoutExpired:
        spy.kill()
        spy.wait()
    return by_thread(out.read_text(), seconds) if out.exists() else None


def _group_count(url: str, interval: str) -> int:
    body = {"query": "SELECT COUNT(*) AS n FROM (SELECT country, page FROM groups GROUP BY 1, 2)"}
    resp = httpx.post(url + "/druid/v2/sql", json=body, timeout=300)
    rows: list[dict[str, int]] = resp.json() if resp.status_code == 200 else [{"n": -1}]
    return rows[0]["n"]


if __name__ == "__main__":
    main()
