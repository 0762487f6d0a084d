"""`python -m tests.sql_corpus`: run Druid's quidem corpus against a fresh local cluster and print
run / passed / failed / skipped-by-reason per file, then the failure categories.

`--write-known-failures` rewrites the ratchet list from this run; `--failures` prints each failing
case with what differed. Bounded: the cluster start and each request have time limits, and the
cases stop after `--time-bound` seconds.

`--qa` runs Druid's QA files instead (`qa.py`: every statement of quidem-ut's `qaAggFuncs`,
`qaArray` and `qaUnnest` against a cluster per dataset, none skipped) and prints the pass rate per
file, then the failure categories and the rate per folder, split by file variant (`.all`/`.std`,
the native engine's, beside `.msq`/`.dart`, Druid's MSQ and Dart engines'); `--files GLOB` runs only the files matching
`<folder>/<file>` (a subset to iterate on); `--write-qa-rates` records the per-folder and
per-variant rates in `qa_pass_rates.json`.
"""

from __future__ import annotations

import argparse
import fnmatch
import sys
import tempfile
from pathlib import Path

from tests.sql_corpus.cluster import corpus_cluster
from tests.sql_corpus.qa import (
    QA_RATES,
    VARIANT_GROUPS,
    folder_table,
    qa_cases,
    run_qa,
    variant_categories,
    write_rates,
)
from tests.sql_corpus.ratchet import KNOWN_FAILURES, ratchet_problems, read_known, write_known
from tests.sql_corpus.runner import Outcome, corpus_cases, failure_categories, run_cases, summary_table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.sql_corpus", description=__doc__)
    parser.add_argument("--write-known-failures", action="store_true", help=f"rewrite {KNOWN_FAILURES.name}")
    parser.add_argument("--failures", action="store_true", help="print every failing case and its difference")
    parser.add_argument("--time-bound", type=float, default=240.0, help="seconds for running the cases")
    parser.add_argument(
        "--qa", action="store_true", help="run Druid's QA files (qaAggFuncs, qaArray, qaUnnest)"
    )
    parser.add_argument(
        "--write-qa-rates", action="store_true", help="with --qa: record the per-folder and per-variant rates"
    )
    parser.add_argument("--workers", type=int, default=4, help="with --qa: statements in flight at once")
    parser.add_argument(
        "--files",
        metavar="GLOB",
        help="with --qa: only the files whose `<folder>/<file>` name matches (`qaArray/ops_funcs_*`)",
    )
    args = parser.parse_args(argv)
    if args.qa:
        return _qa(args)
    cases = corpus_cases()
    with tempfile.TemporaryDirectory(prefix="sql-corpus-") as tmp, corpus_cluster(Path(tmp)) as broker:
        outcomes = run_cases(broker.url, cases, time_bound=args.time_bound)
    report(outcomes, failures=args.failures)
    if args.write_known_failures:
        write_known(outcomes)
        print(f"\nwrote {KNOWN_FAILURES}")
        return 0
    problems = ratchet_problems(outcomes, read_known())
    for p in problems:
        print(p, file=sys.stderr)
    return 1 if problems else 0


def report(outcomes: list[Outcome], *, failures: bool) -> None:
    """The per-file table, the failure categories and, with `failures`, each failing case."""
    print(summary_table(outcomes))
    print("\nfailures by category:")
    for category, n in failure_categories(outcomes):
        print(f"{n:5}  {category}")
    if failures:
        print_failures(outcomes)


def print_failures(outcomes: list[Outcome]) -> None:
    print()
    for o in outcomes:
        if o.status == "failed":
            print(f"{o.case.case_id} (line {o.case.line}): {o.category}\n    {o.detail}")


def _qa(args: argparse.Namespace) -> int:
    cases = qa_cases()
    if args.files:
        cases = [c for c in cases if fnmatch.fnmatchcase(c.file, args.files)]
        if not cases:
            print(f"no QA file matches {args.files!r}", file=sys.stderr)
            return 2
        if args.write_qa_rates:
            print("--write-qa-rates records whole folders: not with --files", file=sys.stderr)
            return 2
    with tempfile.TemporaryDirectory(prefix="sql-qa-") as tmp:
        outcomes = run_qa(Path(tmp), cases, workers=args.workers)
    print(summary_table(outcomes))
    print("\nfailures by category (.all/.std, .msq/.dart):")
    for category, counts in variant_categories(outcomes):
        print("  ".join(f"{counts[v]:5}" for v in VARIANT_GROUPS) + f"  {category}")
    if args.failures:
        print_failures(outcomes)
    print("\n" + folder_table(outcomes))
    if args.write_qa_rates:
        write_rates(outcomes)
        print(f"\nwrote {QA_RATES}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
