"""A soak (issue 36, item 7): mixed load for a long while, a historical restarted halfway, and the
question whether memory stays flat and every answer right.

    python -m bench.soak [--minutes 30] [--clients 4] [--hostile-share 0.25] [--skip CATEGORY,...]
                         [--keep DIR] [--broker-flag=--x=y ...]

A cluster over the wikipedia sample with two historicals holding every segment each (replicas 2,
so a restarted one leaves the other serving). `--clients` threads send, back to back, native and
SQL queries with random parameters whose answers are checked against DuckDB over the very Parquet
files the historicals serve (bench.soak_queries), and - a `--hostile-share` of the time - hostile
requests of every category (bench.hostile), judged by their statuses and deadlines. Halfway, the
first historical is stopped (SIGTERM), left down 10 seconds and started again.

Reported: each process's memory every minute (RSS, MB), the checked queries' count and p50/p99
latency, wrong answers (each logged), hostile requests' problems, the broker's memory growth from
the end of the warm-up (the first quarter) to the end - of its first sample of each minute, and
of its lowest (what it kept, without the peaks of requests running then) - and the health check
after. Timings and memory of a shared machine are noisy: say so beside any figure. A JSON line
ends the output; the exit status is 1 on a wrong answer or a hostile request's problem.
`--keep DIR` runs the cluster in DIR and leaves it there, the processes' logs with it: with
`STRATA_MEMORY_TRACE=SECONDS` in the environment the broker's log tells where its memory went
(strata.server.memory_trace).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

from bench.hostile.categories import CATEGORIES
from bench.hostile.guardrails import GUARDRAIL_CATEGORIES
from bench.hostile.run import send
from bench.measure import log, percentile
from bench.soak_queries import CHECKED, Oracle, same_rows
from bench.wiki_cluster import wikipedia_cluster
from harness.memory import MemoryWatchdog, server_pids

SLOW_CATEGORIES = {"huge IN lists", "10 MB statements"}  # one in this many hostile picks
SLOW_EVERY = 50


class Tally:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.checked: Counter[str] = Counter()
        self.latencies: list[float] = []
        self.wrong: list[str] = []
        self.failed: list[str] = []  # a checked query with no 200 (allowed: at most the restart's)
        self.hostile: Counter[str] = Counter()
        self.hostile_problems: list[str] = []


def client(
    url: str, oracle: Oracle, seed: int, until: float, share: float, skip: set[str], tally: Tally
) -> None:
    rnd = random.Random(seed)
    makers = {n: m for n, m in {**CATEGORIES, **GUARDRAIL_CATEGORIES}.items() if n not in skip}
    names = sorted(makers)
    picks = 0
    with httpx.Client(timeout=120) as http:
        while time.monotonic() < until:
            if names and rnd.random() < share:
                picks += 1
                name = rnd.choice(names)
                if name in SLOW_CATEGORIES and picks % SLOW_EVERY:
                    continue
                outcome = send(http, url, makers[name](rnd))
                with tally.lock:
                    tally.hostile[name] += 1
                    if outcome.problem:
                        tally.hostile_problems.append(str(outcome))
                continue
            with tally.lock:  # DuckDB connections are not shared between threads
                check = rnd.choice(CHECKED)(oracle, rnd)
            started = time.perf_counter()
            try:
                resp = http.post(url + check.path, json=check.body)
            except httpx.HTTPError as e:
                with tally.lock:
                    tally.failed.append(f"{check.name}: {e!r}")
                continue
            seconds = time.perf_counter() - started
            with tally.lock:
                tally.checked[check.name] += 1
                tally.latencies.append(seconds)
                if resp.status_code != 200:
                    tally.failed.append(f"{check.name}: {resp.status_code} {resp.text[:300]}")
                elif not same_rows(check.rows_of(resp.json()), check.expected, check.ordered):
                    tally.wrong.append(f"{check.name}: {json.dumps(check.body)} -> {resp.text[:500]}")


def broker_troughs(watchdog: MemoryWatchdog) -> dict[int, int]:
    """The broker's lowest RSS (MB) of each minute: what it kept, without the transient peaks of
    the requests running when a sample was taken."""
    out: dict[int, int] = {}
    for sample in watchdog.samples:
        if "broker" in sample.rss:
            minute = int(sample.at_s // 60)
            out[minute] = min(out.get(minute, 1 << 62), round(sample.rss["broker"] / 1_048_576))
    return out


def memory_by_minute(watchdog: MemoryWatchdog) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for sample in watchdog.samples:
        minute = int(sample.at_s // 60)
        if not out or out[-1]["minute"] != minute:
            out.append({"minute": minute, **{k: round(v / 1_048_576) for k, v in sample.rss.items()}})
    return out


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--minutes", type=float, default=30)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--hostile-share", type=float, default=0.25)
    parser.add_argument("--skip", default="", help="hostile categories left out, comma-separated")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--broker-flag", action="append", default=[], help="an extra broker flag (--x=y)")
    parser.add_argument("--keep", type=Path, default=None, help="run the cluster in DIR, kept after")
    args = parser.parse_args()
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    seconds = args.minutes * 60
    tally = Tally()
    broker_flags = [part for flag in args.broker_flag for part in flag.split("=", 1)]
    report: dict[str, Any] = {"minutes": args.minutes, "clients": args.clients, "skipped": sorted(skip),
                              "broker_flags": broker_flags}  # fmt: skip
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
    with wikipedia_cluster(broker_flags, replicas=2, keep=args.keep) as c:
        broker = c.brokers[0]
        oracle = Oracle(c.root / "meta.db")
        pids = server_pids(broker.pid, [h.pid for h in c.historicals])
        with MemoryWatchdog(pids, period_s=2.0) as watchdog:
            until = time.monotonic() + seconds
            threads = [threading.Thread(target=client, args=(broker.url, oracle, args.seed + i, until,
                                                             args.hostile_share, skip, tally), daemon=True)
                       for i in range(args.clients)]  # fmt: skip
            for t in threads:
                t.start()
            time.sleep(seconds / 2)
            restarted = c.historicals[0]
            log(f"restarting {restarted.address} (pid {restarted.pid})")
            restarted.stop()
            time.sleep(10)
            restarted.start(timeout=120)
            watchdog.watch("historical0", restarted.pid)
            report["restart_at_minute"] = round(args.minutes / 2, 1)
            for t in threads:
                t.join(timeout=seconds + 300)
            health = httpx.get(broker.url + "/status/health", timeout=10).status_code
        series = memory_by_minute(watchdog)
    warm = next((s for s in series if s["minute"] >= args.minutes / 4), series[0])
    growth = round(100 * (series[-1].get("broker", 0) / max(1, warm.get("broker", 1)) - 1), 1)
    troughs = broker_troughs(watchdog)
    last_full = max((m for m in troughs if m < args.minutes), default=0)  # the last whole minute
    warm_trough, last_trough = troughs.get(warm["minute"], 0), troughs.get(last_full, 0)
    report.update(
        checked=dict(tally.checked),
        checked_total=sum(tally.checked.values()),
        latency_ms={q: round(percentile(tally.latencies, q / 100) * 1000, 1) for q in (50, 99)}
        if tally.latencies
        else {},
        wrong_answers=len(tally.wrong),
        checked_failures=len(tally.failed),
        hostile=dict(tally.hostile),
        hostile_problems=len(tally.hostile_problems),
        memory_mb_by_minute=series,
        memory_peak_mb=watchdog.summary(),
        broker_growth_after_warmup_pct=growth,
        broker_trough_mb_by_minute=troughs,
        broker_trough_growth_after_warmup_pct=round(100 * (last_trough / max(1, warm_trough) - 1), 1),
        broker_health_after=health,
    )
    for line in [*tally.wrong, *tally.failed[:20], *tally.hostile_problems[:20]]:
        log(line[:600])
    log(json.dumps({k: v for k, v in report.items() if k != "memory_mb_by_minute"}, indent=1))
    print(json.dumps(report))
    return 1 if tally.wrong or tally.hostile_problems or health != 200 else 0


if __name__ == "__main__":
    sys.exit(main())
