"""What a change costs per query, on a shared, noisy machine: two clusters at once, one on the code
before the change and one after, over the same segments, queried in alternation.

    python -m bench.paired --before REV [--after REV] [--rows 1000000] [--segments 100]
                           [--batches 12] [--cold 5] [--warm 300]

`bench.ab` runs whole benchmarks one side after the other; minutes apart, a neighbour's load
differs between them. Here both sides run side by side (each: two historicals, a broker without
cache, a broker with `--cache lru`; one ZooKeeper, separate base paths; the same Parquet segments
in one deep storage), each side's processes started with `PYTHONPATH` on its tree (`git archive`
of the revision). For each shape, batches of queries go to one side then the other (which first
alternates), so both meet the same load within seconds. Per batch: wall time per query, and the
CPU each side's processes spent per query, read in nanoseconds from every thread's
/proc/PID/task/TID/schedstat (other processes' load changes it far less than the wall time). The
table gives each side's median over batches, after/before, and the batches' spread. Every answer
is checked to have as many rows on both sides first. Nothing is asserted; a JSON line ends the output.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bench.ab import tree
from bench.cluster_setup import BenchProcess, Dataset, cluster, wait_for_segments, workloads, write_dataset
from bench.measure import log
from bench.sql_end_to_end import join_statements

NO_CACHE = {"useCache": False, "populateCache": False}
SEGMENT_CACHE_ONLY = {"useResultLevelCache": False, "populateResultLevelCache": False}


def cpu_ns(pid: int) -> int:
    """CPU time of every thread of the process so far, in nanoseconds (schedstat's first field)."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except (FileNotFoundError, ProcessLookupError):  # a thread that just ended
            continue
    return total


@dataclass
class Side:
    name: str
    historicals: list[BenchProcess] = field(default_factory=list)
    cold: BenchProcess | None = None
    warm: BenchProcess | None = None

    def pids(self) -> list[int]:
        return [p.pid for p in [*self.historicals, self.cold, self.warm] if p is not None]


@dataclass
class Shape:
    name: str
    send: Callable[[httpx.Client, Side], Any]  # one query, its answer
    per_batch: int


def start_side(name: str, code: Path, root: Path, zk: str, segments: int) -> Side:
    side = Side(name)
    base = f"/strata-paired-{name}"
    env = {"PYTHONPATH": str(code)}
    common = ["--zk", zk, "--zk-base", base, "--deep-storage", str(root / "deep"), "--metadata",
              str(root / "meta.db"), "--replicas", "1", "--poll-period", "1"]  # fmt: skip
    for i in range(2):
        node = BenchProcess("historical", [*common, "--segment-cache", str(root / f"{name}-segcache{i}")],
                            root / f"{name}-historical{i}.log", env=env)  # fmt: skip
        node.start(timeout=60)
        side.historicals.append(node)
    broker = ["--zk", zk, "--zk-base", base]
    cold = BenchProcess("broker", [*broker, "--cache", "none"], root / f"{name}-cold.log", env=env)
    warm = BenchProcess("broker", [*broker, "--cache", "lru", "--cache-size", str(512 << 20)],
                        root / f"{name}-warm.log", env=env)  # fmt: skip
    cold.start(timeout=60)
    warm.start(timeout=60)
    side.cold, side.warm = cold, warm
    for b in (cold, warm):
        wait_for_segments(b, segments, nodes=side.historicals)
    return side


def shapes(ds: Dataset, cold: int, warm: int) -> list[Shape]:
    native = workloads(ds, NO_CACHE)
    out = [
        Shape(f"cold {name}", _native("cold", native[name][0]), cold)
        for name in ("timeseries hour", "topN page x10", "groupBy country,channel")
    ]
    hourly = {**native["timeseries hour"][0], "context": SEGMENT_CACHE_ONLY}
    out.append(Shape("warm timeseries hour, per-segment cache", _native("warm", hourly), warm))
    out.append(Shape("warm timeseries hour, whole answer", _native("warm", {**hourly, "context": {}}), warm))
    join, _ = join_statements(ds)
    out.append(Shape("cold SQL join (broker's DuckDB)", _sql("cold", join), cold))
    grouped = f"SELECT page, SUM(added) AS added FROM {ds.name} GROUP BY page"
    window = f"SELECT page, added, RANK() OVER (ORDER BY added DESC) AS r FROM ({grouped}) t ORDER BY r, page"
    out.append(Shape("cold SQL window over a groupBy", _sql("cold", window), cold))
    return out


def _native(broker: str, body: dict[str, Any]) -> Callable[[httpx.Client, Side], Any]:
    return _poster(broker, "/druid/v2/", body)


def _sql(broker: str, statement: str) -> Callable[[httpx.Client, Side], Any]:
    body = {"query": statement, "context": {**NO_CACHE, "useApproximateTopN": False}}
    return _poster(broker, "/druid/v2/sql", body)


def _poster(broker: str, path: str, body: dict[str, Any]) -> Callable[[httpx.Client, Side], Any]:
    """One query to a side's `broker` ("cold" or "warm"); its answer."""

    def send(client: httpx.Client, side: Side) -> Any:
        process = getattr(side, broker)
        resp = client.post(f"{process.url}{path}", json=body)
        resp.raise_for_status()
        return resp.json()

    return send


def measure(shape: Shape, sides: Sequence[Side], batches: int) -> dict[str, Any]:
    """Per side: wall and CPU per query, one figure per batch."""
    figures: dict[str, dict[str, list[float]]] = {s.name: {"wall_ms": [], "cpu_ms": []} for s in sides}
    with httpx.Client(timeout=300) as client:
        # warms the caches; the sides must answer as many rows (the values of double sums and of
        # topN's approximation depend on how a side's nodes split the segments)
        answers = [shape.send(client, s) for s in sides]
        if len({len(a) for a in answers}) != 1:
            raise AssertionError(f"{shape.name}: the sides answer {[len(a) for a in answers]} rows")
        for batch in range(batches):
            for side in sides if batch % 2 == 0 else list(reversed(sides)):
                pids = side.pids()
                cpu = sum(cpu_ns(p) for p in pids)
                began = time.perf_counter()
                for _ in range(shape.per_batch):
                    shape.send(client, side)
                wall = time.perf_counter() - began
                used = sum(cpu_ns(p) for p in pids) - cpu
                figures[side.name]["wall_ms"].append(wall * 1000 / shape.per_batch)
                figures[side.name]["cpu_ms"].append(used / 1e6 / shape.per_batch)
    row: dict[str, Any] = {"shape": shape.name, "queries_per_batch": shape.per_batch}
    for kind in ("wall_ms", "cpu_ms"):
        before, after = (statistics.median(figures[s.name][kind]) for s in sides)
        row[kind] = {"before": round(before, 3), "after": round(after, 3), "ratio": round(after / before, 3),
                     "before_batches": _quartiles(figures[sides[0].name][kind]),
                     "after_batches": _quartiles(figures[sides[1].name][kind])}  # fmt: skip
    return row


def _quartiles(values: list[float]) -> str:
    """The middle half of the batches' figures: how noisy they were."""
    q = statistics.quantiles(values, n=4, method="inclusive") if len(values) > 1 else values * 3
    return f"{q[0]:.3g}-{q[2]:.3g}"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", required=True, help="the revision measured as the baseline")
    ap.add_argument("--after", default="HEAD", help="the revision measured against it (default HEAD)")
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--segments", type=int, default=100)
    ap.add_argument("--batches", type=int, default=12, help="batches per side and shape")
    ap.add_argument("--cold", type=int, default=5, help="queries per batch of a cold shape")
    ap.add_argument("--warm", type=int, default=300, help="queries per batch of a warm shape")
    args = ap.parse_args(argv)
    report: dict[str, Any] = {"before": args.before, "after": args.after, "rows": args.rows, "shapes": []}
    with tempfile.TemporaryDirectory(prefix="strata-paired-") as trees, cluster() as c:
        code = {
            side: tree(rev, Path(trees) / side)
            for side, rev in (("before", args.before), ("after", args.after))
        }
        ds = write_dataset(c.root, "bench", args.rows, args.segments)
        c.start_zookeeper()
        sides = []
        try:
            for name in ("before", "after"):
                sides.append(start_side(name, code[name], c.root, c.zk_hosts, args.segments))
            log(f"two clusters up over {args.rows:,} rows in {args.segments} segments")
            log(f"{'shape':42s} {'wall ms/query before -> after':>32s}   {'CPU ms/query':>32s}")
            for shape in shapes(ds, args.cold, args.warm):
                load = Path("/proc/loadavg").read_text().split()[0]
                row = measure(shape, sides, args.batches)
                row["load_average"] = float(load)
                report["shapes"].append(row)
                w, u = row["wall_ms"], row["cpu_ms"]
                log(f"{shape.name:42s} {w['before']:9.3f} -> {w['after']:9.3f} ({w['ratio']:.3f}x)   "
                    f"{u['before']:9.3f} -> {u['after']:9.3f} ({u['ratio']:.3f}x)   load {load}")  # fmt: skip
        finally:
            for side in sides:
                for p in [side.cold, side.warm, *side.historicals]:
                    if p is not None:
                        p.stop()
    print(json.dumps(report))


if __name__ == "__main__":
    main()
