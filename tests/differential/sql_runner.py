"""Run generated SQL (tests.differential.sql_generator) against real brokers and compare with
DuckDB answering the same question over the raw rows.

    python -m tests.differential.sql_runner [--n 2000] [--seed 1] [--show 10]

Each statement runs on every segmentation of the sample (one DAY segment; HOUR segments; HOUR
segments of at most 1,000 rows) through a broker without cache and one with the LRU cache, asked
twice (cold, then warm). Rows compare as multisets unless the statement orders every output.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import duckdb

from harness.processes import StrataProcess
from tests.differential.fanout import Fanout
from tests.differential.runner import SEGMENTATIONS, Outcome, ingest_all, nodes, raw_connection
from tests.differential.sql_generator import SqlCase, generate_sql


def _norm(value: Any) -> Any:
    if isinstance(value, float):
        return None if math.isnan(value) else float(f"{value:.9g}")
    return value


def _rows(rows: Sequence[Sequence[Any]], ordered: bool) -> list[str]:
    out = [json.dumps([_norm(v) for v in r], default=str) for r in rows]
    return out if ordered else sorted(out)


def expected(conn: duckdb.DuckDBPyConnection, case: SqlCase) -> list[str]:
    cur = conn.execute(case.duck)
    return _rows(cur.fetchall(), case.ordered)


def run_sql(
    n: int,
    seed: int,
    targets: dict[str, StrataProcess],
    conn: duckdb.DuckDBPyConnection,
    *,
    show: int = 5,
    data_sources: Sequence[str] = tuple(SEGMENTATIONS),
    generate: Callable[[random.Random, str], SqlCase] = generate_sql,
) -> Outcome:
    """`data_sources`: those the statements run on (each holding exactly the rows `conn` has);
    `generate` makes each statement."""
    rnd = random.Random(seed)
    outcome = Outcome()
    chains = [[("plain", targets["plain"])], [("lru", targets["lru"]), ("lru-warm", targets["lru"])]]
    with Fanout(chains) as fanout:
        for _ in range(n):
            template = generate(rnd, "TABLE")
            want = expected(conn, template)
            for ds in data_sources:
                statement = template.druid.replace("TABLE", ds)
                body = {"query": statement, "resultFormat": "array", "context": template.context}
                for label, resp in fanout.post("/druid/v2/sql", body):
                    outcome.ran[template.kind] += 1
                    got = _rows(resp.json(), template.ordered) if resp.status_code == 200 else [resp.text]
                    if got != want:
                        outcome.differed[template.kind] += 1
                        if len(outcome.failures) < show:
                            outcome.failures.append(
                                f"[{label} {ds}] {statement}\n  duckdb   {template.duck}\n"
                                f"  expected {want[:20]}\n  got      {got[:20]}"
                            )
    return outcome


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--n", type=int, default=1000, help="generated statements (each: 3 datasources x 3 targets)"
    )
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--show", type=int, default=10, help="differences to print")
    args = ap.parse_args(argv)
    from strata.data import WIKIPEDIA_INDEX_SPEC, WIKIPEDIA_SAMPLE

    with tempfile.TemporaryDirectory(prefix="strata-sql-differential-") as tmp:
        root = Path(tmp)
        ingest_all(root, WIKIPEDIA_SAMPLE, WIKIPEDIA_INDEX_SPEC)
        with nodes(root, None) as targets:
            outcome = run_sql(args.n, args.seed, targets, raw_connection(WIKIPEDIA_SAMPLE), show=args.show)
    print(outcome.summary())
    for failure in outcome.failures:
        print(failure)
    return 1 if sum(outcome.differed.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
