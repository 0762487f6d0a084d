"""What a change costs: benchmarks run on the code before it and after it, back to back, in rounds.

    python -m bench.ab --before REV [--after REV] [--only broker,throughput,sql] [--rounds 3]
                       [--bench-args 'broker=--rows 1000000 --repeat 5' ...]
    python -m bench.ab --compare DIR     # the table again from a run's kept outputs

Each side is the repository at a revision (`git archive`, into a temporary directory; without
`--after`, the working tree's HEAD), run with `PYTHONPATH` set to it, so the benchmark and every
process it starts (brokers, historicals) run that side's code. The rounds alternate which side
goes first (before-after, after-before, ...), so a neighbour's load on a shared machine, which
comes and goes over minutes, falls on both alike. Each benchmark's last output line (its JSON
figures) is kept under `--out`; the table gives, for every figure of a kind the benchmarks report
(milliseconds, queries/s, CPU per query, rows/s), the median over rounds of each side, their ratio
(after/before: above 1 is slower for times and CPU, faster for rates) and the rounds' spread, so
the noise is visible beside the difference. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.measure import log

REPO = Path(__file__).resolve().parent.parent
DEFAULT_ARGS = {
    "broker": "--rows 1000000 --segments 100 --many 500 --repeat 5 --seconds 4",
    "throughput": "--rows 1000000 --segments 100 --seconds 4 --repeat 3 --sweep 16",
    "sql": "--rows 1000000 --segments 100 --e2e-repeat 5 --repeat 500",
}
# figures compared, by the last key of their path; `higher` ones are rates (more is better)
KINDS = {
    "broker_ms": "lower", "sql_ms": "lower", "native_ms": "lower", "median_us": "lower", "p99_us": "lower",
    "cpu_us_per_query": "lower", "broker_cpu_us_per_segment": "lower", "broker": "lower",
    "qps": "higher", "rows_per_s": "higher", "first_byte_s": "lower", "broker_rss_mib_peak": "lower",
}  # fmt: skip
_NUMBER = re.compile(r"^-?\d+(?:\.\d+)?")


def tree(rev: str, into: Path) -> Path:
    """The repository at `rev`, unpacked into `into`."""
    into.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "-C", str(REPO), "archive", rev], check=True, capture_output=True)
    with tempfile.TemporaryFile() as f:
        f.write(archive.stdout)
        f.seek(0)
        with tarfile.open(fileobj=f) as tar:
            tar.extractall(into, filter="data")
    return into


def run(side: Path, bench: str, args: str, out: Path, timeout: float) -> dict[str, Any] | None:
    """One benchmark on one side; its JSON figures (None when it failed: its output is kept)."""
    command = [sys.executable, "-m", f"bench.{bench}", *shlex.split(args)]
    env = {**os.environ, "PYTHONPATH": str(side)}
    with out.open("w") as f:
        done = subprocess.run(command, cwd=side, env=env, stdout=f, stderr=subprocess.STDOUT, timeout=timeout,
                              check=False)  # fmt: skip
    lines = out.read_text().strip().splitlines()
    if done.returncode != 0 or not lines:
        return None
    try:
        figures: dict[str, Any] = json.loads(lines[-1])
    except json.JSONDecodeError:
        return None
    return figures


def flatten(value: Any, path: str = "") -> Iterator[tuple[str, float]]:
    """(path, number) for every figure of a compared kind; list items named by their `query` or
    `scenario`, "12.3 [10.1-15.0]" read as its median."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from flatten(item, f"{path}/{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            name = item.get("query") or item.get("scenario") if isinstance(item, dict) else None
            yield from flatten(item, f"{path}/{name or i}")
    elif path.rsplit("/", 1)[-1] in KINDS:
        if isinstance(value, bool):
            return
        if isinstance(value, (int, float)):
            yield path, float(value)
        elif isinstance(value, str) and (m := _NUMBER.match(value)):
            yield path, float(m.group())


def compare(out: Path, benches: list[str]) -> list[dict[str, Any]]:
    rows = []
    for bench in benches:
        sides: dict[str, dict[str, list[float]]] = {"before": {}, "after": {}}
        for path in sorted(out.glob(f"*-*-{bench}.json")):
            side = path.stem.split("-")[1]
            for key, number in flatten(json.loads(path.read_text())):
                sides[side].setdefault(key, []).append(number)
        for key, before in sides["before"].items():
            after = sides["after"].get(key)
            if not after:
                continue
            b, a = statistics.median(before), statistics.median(after)
            rows.append({
                "bench": bench, "figure": key, "before": b, "after": a,
                "ratio": round(a / b, 3) if b else None, "kind": KINDS[key.rsplit("/", 1)[-1]],
                "before_rounds": before, "after_rounds": after,
            })  # fmt: skip
    return rows


def print_table(rows: list[dict[str, Any]]) -> None:
    print(f"{'figure':70s} {'before':>10s} {'after':>10s} {'after/before':>12s}  rounds before | after")
    for r in rows:
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.3f}"
        spread = [" ".join(f"{x:g}" for x in r[f"{side}_rounds"]) for side in ("before", "after")]
        kind = " (rate)" if r["kind"] == "higher" else ""
        name = r["bench"] + r["figure"]
        print(f"{name:70s} {r['before']:10.4g} {r['after']:10.4g} {ratio:>12s}  {' | '.join(spread)}{kind}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", help="the revision measured as the baseline")
    ap.add_argument("--after", default="HEAD", help="the revision measured against it (default HEAD)")
    ap.add_argument("--only", default="broker,throughput,sql")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--bench-args", action="append", default=[], metavar="NAME=ARGS",
                    help="a benchmark's arguments (defaults: a 1M-row dataset, shorter runs)")  # fmt: skip
    ap.add_argument("--out", type=Path, default=None, help="where outputs are kept (default: a new temp dir)")
    ap.add_argument("--timeout", type=float, default=2400, help="seconds per benchmark run")
    ap.add_argument("--compare", type=Path, default=None, help="only print the table of a kept run")
    args = ap.parse_args(argv)
    benches = [b for b in args.only.split(",") if b]
    if args.compare is not None:
        print_table(compare(args.compare, benches))
        return 0
    if not args.before:
        ap.error("--before REV is required")
    bench_args = dict(DEFAULT_ARGS)
    for item in args.bench_args:
        name, _, value = item.partition("=")
        bench_args[name] = value
    out = args.out or Path(tempfile.mkdtemp(prefix="strata-ab-"))
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="strata-ab-trees-") as trees:
        sides = {
            "before": tree(args.before, Path(trees) / "before"),
            "after": tree(args.after, Path(trees) / "after"),
        }
        for round_ in range(1, args.rounds + 1):
            order = ["before", "after"] if round_ % 2 else ["after", "before"]
            for side in order:
                for bench in benches:
                    load = Path("/proc/loadavg").read_text().split()[0]
                    log(f"round {round_}: {side} {bench} (load average {load})")
                    began = time.monotonic()
                    figures = run(sides[side], bench, bench_args[bench], out / f"{round_}-{side}-{bench}.out",
                                  args.timeout)  # fmt: skip
                    if figures is None:
                        log(f"  failed: see {out / f'{round_}-{side}-{bench}.out'}")
                        continue
                    (out / f"{round_}-{side}-{bench}.json").write_text(json.dumps(figures))
                    log(f"  {time.monotonic() - began:.0f}s")
    print_table(compare(out, benches))
    print(json.dumps({"out": str(out), "before": args.before, "after": args.after, "rounds": args.rounds}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
