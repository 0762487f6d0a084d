"""Thousands of generated native queries against a real historical and brokers, vs the oracle.

    python -m tests.differential [--n 5000] [--seed 1] [--show 10] [--no-memcached]
    python -m tests.differential sql-reference [--n 1000] [--seed 1] [--examples 2] [--datasources diff_hour]

Starts its own historical, brokers (no cache, LRU, memcached, hybrid) and memcached on free loopback
ports under a temporary directory, prints ran/differed per query type and the first differences,
and exits 1 when any query differed. `sql-reference` runs Druid SQL generated from Druid's SQL
reference (tests.differential.sql_reference_generator) against DuckDB over the raw rows and prints
statements run / equal / different / refused per category with examples of each failure.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from tests.differential.runner import ingest_all, nodes, raw_connection, run


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", nargs="?", choices=["native", "sql-reference"], default="native")
    ap.add_argument(
        "--n", type=int, default=1000, help="generated queries (each runs on 3 datasources x 5 targets)"
    )
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--show", type=int, default=10, help="differences to print")
    ap.add_argument("--no-memcached", action="store_true")
    ap.add_argument(
        "--examples", type=int, default=2, help="sql-reference: examples per category and outcome"
    )
    ap.add_argument("--datasources", default="diff_hour", help="sql-reference: comma-separated segmentations")
    args = ap.parse_args(argv)
    if args.mode == "sql-reference":
        return sql_reference(args.n, args.seed, args.examples, args.datasources.split(","))
    from strata.cli.local_servers import MemcachedServer, free_port
    from strata.data import WIKIPEDIA_INDEX_SPEC, WIKIPEDIA_SAMPLE

    with tempfile.TemporaryDirectory(prefix="strata-differential-") as tmp:
        root = Path(tmp)
        ranges = ingest_all(root, WIKIPEDIA_SAMPLE, WIKIPEDIA_INDEX_SPEC)
        memcached = None if args.no_memcached else MemcachedServer(port=free_port()).start()
        try:
            address = None if memcached is None else f"127.0.0.1:{memcached.port}"
            with nodes(root, address) as targets:
                outcome = run(
                    args.n, args.seed, targets, raw_connection(WIKIPEDIA_SAMPLE), ranges, show=args.show
                )
        finally:
            if memcached is not None:
                memcached.stop()
    print(outcome.summary())
    for failure in outcome.failures:
        print(failure)
    return 1 if sum(outcome.differed.values()) else 0


def sql_reference(n: int, seed: int, examples: int, datasources: list[str]) -> int:
    from strata.data import WIKIPEDIA_INDEX_SPEC, WIKIPEDIA_SAMPLE
    from tests.differential.sql_reference_oracle import ReferenceOracle
    from tests.differential.sql_reference_runner import run_reference

    with tempfile.TemporaryDirectory(prefix="strata-sql-reference-") as tmp:
        root = Path(tmp)
        ingest_all(root, WIKIPEDIA_SAMPLE, WIKIPEDIA_INDEX_SPEC, datasources)
        with nodes(root, None, datasources) as targets:
            oracle = ReferenceOracle(WIKIPEDIA_SAMPLE, datasources)
            outcome = run_reference(n, seed, targets, oracle, datasources, examples=examples)
    print(outcome.report())
    return 1 if outcome.failing() else 0


if __name__ == "__main__":
    sys.exit(main())
