"""Seconds per unit of `pytest -n 2` (tests/workers.py) from a whole run's `--junitxml`, and how
two workers share the units in `SLOW_UNITS` order: what to read when re-ordering `SLOW_UNITS`.

    python -m tests.unit_times JUNIT_XML [--top 30]

A test's time in the XML is its setup, call and teardown, so a module's cluster counts in its
first test and its teardown in its last. The sharing replays xdist's scope scheduling: each worker
starts with a unit, and takes the next one whenever at most two of its tests are left; the run
ends when the busier worker ends.
"""

from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from tests.workers import SLOW_UNITS, unit_of

ROOT = Path(__file__).resolve().parents[1]


def nodeid(classname: str, name: str) -> str:
    """`tests.a.test_b.Class` + `test_c` -> `tests/a/test_b.py::Class::test_c`."""
    parts = classname.split(".")
    for cut in range(len(parts), 0, -1):
        module = "/".join(parts[:cut]) + ".py"
        if (ROOT / module).is_file():
            return "::".join([module, *parts[cut:], name])
    return f"{classname}::{name}"


def unit_tests(junit: Path) -> dict[str, list[float]]:
    """Each unit's test times, units in the order the run handed them out (first seen)."""
    units: dict[str, list[float]] = defaultdict(list)
    for case in ET.parse(junit).getroot().iter("testcase"):
        node = nodeid(case.get("classname", ""), case.get("name", ""))
        units[unit_of(node)].append(float(case.get("time", 0)))
    return units


def in_order(units: dict[str, list[float]]) -> list[str]:
    """SLOW_UNITS first, in their order, then the rest in the order the run met them."""
    return sorted(units, key=lambda u: SLOW_UNITS.index(u) if u in SLOW_UNITS else len(SLOW_UNITS))


@dataclass
class Worker:
    name: str
    clock: float = 0.0
    queue: list[float] = field(default_factory=list)
    units: list[str] = field(default_factory=list)


def share(units: dict[str, list[float]], order: list[str], workers: int = 2) -> list[Worker]:
    """Replay the scheduling: every worker runs its queue; a unit goes to a worker when at most
    two of its tests wait (xdist's LoadScopeScheduling); returns the workers with their clocks."""
    pending = list(order)
    crew = [Worker(f"gw{i}") for i in range(workers)]

    def give(worker: Worker) -> None:
        if pending:
            unit = pending.pop(0)
            worker.queue.extend(units[unit])
            worker.units.append(unit)

    for worker in crew:
        give(worker)
    for worker in crew:
        if len(worker.queue) <= 2:
            give(worker)
    while any(w.queue for w in crew):
        worker = min((w for w in crew if w.queue), key=lambda w: w.clock + w.queue[0])
        worker.clock += worker.queue.pop(0)
        if len(worker.queue) <= 2:
            give(worker)
    return crew


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("junit", type=Path)
    ap.add_argument("--top", type=int, default=30, help="units to list, slowest first")
    args = ap.parse_args(argv)
    units = unit_tests(args.junit)
    total = {u: sum(times) for u, times in units.items()}
    print(f"{'seconds':>8} {'tests':>6}  unit")
    for unit in sorted(total, key=lambda u: -total[u])[: args.top]:
        print(f"{total[unit]:8.1f} {len(units[unit]):6}  {unit}")
    print(f"{sum(total.values()):8.1f} {sum(map(len, units.values())):6}  (all {len(units)} units)")
    for worker in share(units, in_order(units)):
        print(
            f"{worker.name}: busy {worker.clock:7.1f} s, {len(worker.units)} units, last {worker.units[-1]}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
