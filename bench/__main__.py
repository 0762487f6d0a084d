"""Every component benchmark in one run, and docs/benchmarks.md with a table per benchmark and plots.

    python -m bench [--rows 10000000] [--segments 100] [--only broker,sql,...] [--out bench]
    python -m bench --report-only      # the page again from bench/results.json and bench/notes.md

Each benchmark runs as its own process (`python -m bench.<name>`), at the dataset size given here;
its last output line (one JSON object) is kept in `results.json` (with the machine and the size
under `_run`) and rendered by `bench.report` into PNG plots (latency per query and cache state
beside DuckDB, latency against segment count from 10 to 10,000 one-hour segments, queries per
second against concurrency) and docs/benchmarks.md, where each section of bench/notes.md is
followed by its benchmark's tables. Every figure stands beside its baseline measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from bench.child import run_one
from bench.report import machine, write_report
from bench.suite import benchmarks

HERE = Path(__file__).resolve().parent
PAGE = HERE.parent / "docs" / "benchmarks.md"
NOTES = HERE / "notes.md"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--segments", type=int, default=100)
    ap.add_argument("--only", default="", help="comma-separated subset, e.g. broker,sql,scaling")
    ap.add_argument("--out", type=Path, default=HERE)
    ap.add_argument("--timeout", type=float, default=3600, help="seconds per benchmark")
    ap.add_argument("--page", type=Path, default=PAGE, help="the page to write (default docs/benchmarks.md)")
    ap.add_argument(
        "--report-only", action="store_true", help="run nothing: the page from --out's results.json"
    )
    ap.add_argument(
        "--keep", action="store_true", help="keep the figures of benchmarks not run from --out's results.json"
    )
    args = ap.parse_args(argv)
    if args.report_only:
        write_report(json.loads((args.out / "results.json").read_text()), args.out, args.page, NOTES)
        print(f"wrote {args.page}")
        return 0
    plan = benchmarks(args.rows, args.segments)
    wanted = [n for n in args.only.split(",") if n] or list(plan)
    unknown = [n for n in wanted if n not in plan]
    if unknown:
        ap.error(f"unknown benchmarks {unknown}; known: {', '.join(plan)}")
    available = {p.stem for p in HERE.glob("*.py")}
    results: dict[str, Any] = {}
    if args.keep and (args.out / "results.json").exists():
        results = json.loads((args.out / "results.json").read_text())
    for name in wanted:
        if name not in available:
            results[name] = {"error": "not in this checkout"}
            continue
        results[name] = run_one(name, plan[name], args.timeout)
    if not args.keep or "_run" not in results:
        results["_run"] = {"rows": args.rows, "segments": args.segments, "machine": machine(),
                       "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}  # fmt: skip
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(results, indent=1))
    write_report(results, args.out, args.page, NOTES)
    print(f"wrote {args.page}")
    return 1 if any("error" in r for k, r in results.items() if not k.startswith("_")) else 0


if __name__ == "__main__":
    sys.exit(main())
