"""Hostile load against a real cluster (issue 36, item 6): the error sweep and every hostile category,
mixed, `--requests` of them, `--concurrency` at a time, with a memory watchdog on the broker and the
historicals.

    python -m bench.hostile [--requests 10000] [--concurrency 4] [--seed 36] [--skip CATEGORY,...]
                            [--broker-memory-limit-mb 4096] [--broker-flag=--max-concurrent-queries=8 ...]

Passes when no request got a 5xx (a 504 at a request's own deadline aside) or Druid's catch-all,
none was answered past its deadline, no connection dropped, the broker answers its health check
and the wikipedia count right at the end, and its peak memory stayed under the limit. Prints the
statuses by category, the problems found (the first 50) and each process's first, last and peak
memory; exits 1 on any problem. A JSON line ends the output.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from bench.hostile.categories import CATEGORIES
from bench.hostile.guardrails import GUARDRAIL_CATEGORIES, HEAVY
from bench.hostile.request import Hostile
from bench.hostile.run import Outcome, run_requests, tally
from bench.hostile.sweep import sweep_cases
from bench.measure import log
from bench.wiki_cluster import WIKIPEDIA_ROWS, wikipedia_cluster
from harness.memory import MemoryWatchdog, server_pids

SWEEP_SHARE = 0.6  # of the requests; the rest are hostile categories, round-robin


def mixed_requests(total: int, seed: int, skip: set[str]) -> Iterator[Hostile]:
    """`total` requests: a share of the sweep (cycled if asked for more than it has) and the
    hostile categories in turn, each heavy one capped in proportion to the total."""
    rnd = random.Random(seed)
    sweep = sweep_cases(seed)
    rnd.shuffle(sweep)
    makers = {name: make for name, make in {**CATEGORIES, **GUARDRAIL_CATEGORIES}.items() if name not in skip}
    caps = {name: max(1, HEAVY[name] * total // 1000) for name in HEAVY}
    caps["huge IN lists"] = max(1, 4 * total // 1000)
    made: dict[str, int] = dict.fromkeys(makers, 0)
    cycle = itertools.cycle(sweep)
    names = itertools.cycle(sorted(makers))
    for _ in range(total):
        if rnd.random() < SWEEP_SHARE or not makers:
            yield next(cycle)
            continue
        for _ in range(len(makers)):
            name = next(names)
            if made[name] < caps.get(name, total):
                made[name] += 1
                yield makers[name](rnd)
                break
        else:
            yield next(cycle)


def healthy(url: str) -> str | None:
    """What is wrong with the broker after the load (None: it answers, and answers right)."""
    try:
        if httpx.get(url + "/status/health", timeout=10).status_code != 200:
            return "health check failed"
        count = {"query": "SELECT COUNT(*) AS c FROM wikipedia"}
        resp = httpx.post(url + "/druid/v2/sql", json=count, timeout=60)
    except httpx.HTTPError as e:
        return f"broker unreachable: {e!r}"
    if resp.status_code != 200 or resp.json() != [{"c": WIKIPEDIA_ROWS}]:
        return f"wrong count after the load: {resp.status_code} {resp.text[:200]}"
    return None


def main() -> int:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=raw)
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--seed", type=int, default=36)
    parser.add_argument("--skip", default="", help="hostile categories left out, comma-separated")
    parser.add_argument("--broker-memory-limit-mb", type=int, default=4096)
    parser.add_argument("--broker-flag", action="append", default=[], help="an extra broker flag (--x=y)")
    parser.add_argument("--keep", type=Path, default=None, help="run the cluster in DIR and keep it (logs)")
    args = parser.parse_args()
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    broker_flags = [part for flag in args.broker_flag for part in flag.split("=", 1)]
    report: dict[str, Any] = {"requests": args.requests, "concurrency": args.concurrency}
    report["skipped"] = sorted(skip)
    with wikipedia_cluster(broker_flags, keep=args.keep) as c:
        broker = c.brokers[0]
        pids = server_pids(broker.pid, [h.pid for h in c.historicals])
        started = time.monotonic()
        done = 0

        def progress(outcome: Outcome) -> None:
            nonlocal done
            done += 1
            if done % 500 == 0:
                log(f"{done} requests, {time.monotonic() - started:.0f}s")

        with MemoryWatchdog(pids) as watchdog:
            outcomes = run_requests(broker.url, mixed_requests(args.requests, args.seed, skip),
                                    args.concurrency, progress)  # fmt: skip
            after = healthy(broker.url)
        report["seconds"] = round(time.monotonic() - started, 1)
        report["statuses"] = tally(outcomes)
        problems = [str(o) for o in outcomes if o.problem]
        if after is not None:
            problems.append(f"broker after the load: {after}")
        over = watchdog.over(args.broker_memory_limit_mb * 1_048_576)
        if "broker" in over:
            problems.append(f"broker peak memory {over['broker'] / 1_048_576:.0f} MB over the limit")
        report["memory_mb"] = watchdog.summary()
        report["problems"] = len(problems)
        report["slowest_s"] = round(max((o.seconds for o in outcomes), default=0.0), 1)
    for line in problems[:50]:
        log(line[:600])
    log(json.dumps({k: v for k, v in report.items() if k != "statuses"}, indent=1))
    print(json.dumps(report))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
