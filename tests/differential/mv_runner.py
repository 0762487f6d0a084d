"""Generated native queries and SQL over multi-value, array and nested columns against real nodes.

    python -m tests.differential.mv_runner [--n 2000] [--sql 1000] [--seed 1] [--show 10] [--no-memcached]

tests.differential.mv_data's rows are ingested by `strata ingest` in the three segmentations of
tests.differential.runner and served by one historical and the brokers of `runner.nodes` (no
cache, LRU cold and warm, memcached per-segment cold and warm); each native query
(tests.differential.mv_generator) and statement (tests.differential.mv_sql_generator) is compared
with DuckDB over the same rows held apart. Exits 1 when any answer differed.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb

from harness.processes import StrataProcess
from tests.differential import mv_generator, mv_sql_generator
from tests.differential.mv_data import generate_rows, write_input
from tests.differential.runner import Outcome, ingest_all, nodes, run
from tests.differential.sql_runner import run_sql

Setup = tuple[dict[str, StrataProcess], dict[str, list[tuple[int, int]]], duckdb.DuckDBPyConnection]


@contextmanager
def mv_cluster(root: Path, memcached: str | None) -> Iterator[Setup]:
    """The rows ingested under `root` and served: (targets, segment time ranges, oracle)."""
    rows = generate_rows()
    sample, spec = write_input(root / "input", rows)
    ranges = ingest_all(root, sample, spec)
    with nodes(root, memcached) as targets:
        yield targets, ranges, mv_generator.oracle_connection(rows)


def run_native(n: int, seed: int, setup: Setup, *, show: int = 5) -> Outcome:
    targets, ranges, conn = setup
    return run(n, seed, targets, conn, ranges, show=show, generate_query=mv_generator.generate)


def run_statements(n: int, seed: int, setup: Setup, *, show: int = 5) -> Outcome:
    targets, _, conn = setup
    return run_sql(n, seed, targets, conn, show=show, generate=mv_sql_generator.generate_sql)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=2000, help="native queries (each on 3 datasources x 8 targets)")
    ap.add_argument("--sql", type=int, default=1000, help="statements (each on 3 datasources x 3 targets)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--show", type=int, default=10, help="differences to print")
    ap.add_argument("--no-memcached", action="store_true")
    args = ap.parse_args(argv)
    from strata.cli.local_servers import MemcachedServer, free_port

    memcached = None if args.no_memcached else MemcachedServer(port=free_port()).start()
    try:
        with tempfile.TemporaryDirectory(prefix="strata-mv-differential-") as tmp:
            address = None if memcached is None else f"127.0.0.1:{memcached.port}"
            with mv_cluster(Path(tmp), address) as setup:
                outcomes = [run_native(args.n, args.seed, setup, show=args.show),
                            run_statements(args.sql, args.seed, setup, show=args.show)]  # fmt: skip
    finally:
        if memcached is not None:
            memcached.stop()
    for outcome in outcomes:
        print(outcome.summary())
        for failure in outcome.failures:
            print(failure)
    return 1 if any(sum(o.differed.values()) for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
