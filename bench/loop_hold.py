"""What a cross join's subquery rows cost the cheap requests beside them: a SQL scan's 40,000 rows
made into rows for DuckDB (`SqlPlan.rows`, ~150 ms of Python) on the event loop, or on a worker
thread at Python's default switch interval (5 ms) and at the broker's (1 ms), while a probe on the
loop times stand-ins for cheap requests, one arriving every 5 ms: five trips through `select()` each,
as a request's I/O makes, timed from its arrival.

    python -m bench.loop_hold [--rows 40000] [--rounds 3] [--burners N]

On the loop the conversion holds every request arriving meanwhile for its whole length; on a thread
each of the request's trips waits for the interpreter lock, up to a switch interval (the "convoy"
of an I/O thread beside a CPU-bound one), which the broker shortens. A low-priority statement's
rows are made on a thread at nice 10 (`thread at nice 10`): while the cores are busy (`--burners N`
processes spinning at nice 0 beside every round, as a flood's other work would) the kernel may take
that thread off its core while it holds the interpreter lock, and the loop waits for it longer than
a switch interval. Wall times: run it on a quiet machine for figures worth quoting.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from bench.measure import log, percentile
from bench.sql import TablesCatalog
from strata.server.thread_priority import LOW_NICE, lower_own_priority
from strata.sql.composed import ComposedPlan
from strata.sql.plan import SqlPlan
from strata.sql.statement import plan_statement

COLUMNS = {"__time": "LONG", **{f"d{i}": "STRING" for i in range(14)}, **{f"m{i}": "LONG" for i in range(5)}}
HOPS = 5
HOP_S = 0.0005
ARRIVAL_S = 0.005
PAUSE_S = 0.1  # between conversions, as a broker has other work between a statement's stages


def scan_stage(rows: int) -> tuple[SqlPlan, list[dict[str, Any]]]:
    """The first stage of `SELECT * FROM wikipedia, wikipedia` and a scan answer of `rows` rows."""
    plan = plan_statement(
        "SELECT * FROM wikipedia, wikipedia", TablesCatalog({"wikipedia": COLUMNS}), {}
    ).plan
    assert isinstance(plan, ComposedPlan)
    stage = plan.stages[0].plan
    assert isinstance(stage, SqlPlan) and stage.native is not None
    columns: list[str] = stage.native["columns"]
    events = [
        [i if c == "__time" or c.startswith("m") else f"v{i % 997}" for c in columns] for i in range(rows)
    ]
    batches = [{"segmentId": f"s{k}", "columns": columns, "events": events[k : k + 4096]}
               for k in range(0, rows, 4096)]  # fmt: skip
    return stage, batches


async def _probe(stop: asyncio.Event, took: list[float]) -> None:
    """Requests arriving every `ARRIVAL_S` whatever the loop is doing (an open loop, as clients
    are), each timed from when it arrived: one arriving while the loop is held waits for it."""
    loop = asyncio.get_running_loop()
    requests: list[asyncio.Task[None]] = []

    async def request(arrived: float) -> None:
        for _ in range(HOPS):
            await asyncio.sleep(HOP_S)
        took.append(loop.time() - arrived)

    due = loop.time()
    while not stop.is_set():
        while due <= loop.time():
            requests.append(asyncio.create_task(request(due)))
            due += ARRIVAL_S
        await asyncio.sleep(max(0.0, due - loop.time()))
    await asyncio.gather(*requests)


async def _round(mode: str, stage: SqlPlan, batches: list[dict[str, Any]], rounds: int) -> dict[str, float]:
    stop = asyncio.Event()
    took: list[float] = []
    probe = asyncio.create_task(_probe(stop, took))
    await asyncio.sleep(0.05)
    took.clear()
    started = time.perf_counter()
    for _ in range(rounds):
        if mode == "idle":
            await asyncio.sleep(0.15)
        elif mode == "loop":
            stage.rows(batches)
        elif mode == "low":
            with ThreadPoolExecutor(1, initializer=lower_own_priority, initargs=(LOW_NICE,)) as low:
                await asyncio.get_running_loop().run_in_executor(low, stage.rows, batches)
        else:
            await asyncio.to_thread(stage.rows, batches)
        await asyncio.sleep(PAUSE_S)
    wall = time.perf_counter() - started
    stop.set()
    await probe
    return {"wall_ms": round(wall * 1000), "requests": len(took),
            **{f"p{q}_ms": round(percentile(took, q / 100) * 1000, 1) for q in (50, 90)},
            "max_ms": round(max(took) * 1000, 1)}  # fmt: skip


def main() -> None:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("--rows", type=int, default=40_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--burners", type=int, default=0, help="processes spinning at nice 0 meanwhile")
    args = parser.parse_args()
    stage, batches = scan_stage(args.rows)
    report: dict[str, Any] = {}
    burners = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(args.burners)]
    for burner in burners:
        burner.start()
    try:
        for name, interval, mode in [("idle", 0.005, "idle"), ("on the loop", 0.005, "loop"),
                                     ("thread, 5 ms switch", 0.005, "thread"),
                                     ("thread, 1 ms switch (the broker's)", 0.001, "thread"),
                                     ("thread at nice 10, 1 ms switch", 0.001, "low")]:  # fmt: skip
            sys.setswitchinterval(interval)
            report[name] = asyncio.run(_round(mode, stage, batches, args.rounds))
            log(f"{name}: {report[name]}")
    finally:
        for burner in burners:
            burner.terminate()
            burner.join(5)
    print(json.dumps(report))


def _spin() -> None:
    while True:
        pass


if __name__ == "__main__":
    main()
