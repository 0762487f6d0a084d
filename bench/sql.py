"""Druid SQL: planning time in process, then end to end through a real cluster.

    python -m bench.sql [--repeat 2000] [--rows 10000000] [--segments 100] [--e2e-repeat 5]
                        [--planning-only]

1. Planning: the median and p99 microseconds from SQL text to native query JSON for the shapes
   dashboards send (target: under 2 ms).
2. End to end on `--rows` synthetic rows in `--segments` hourly segments (ZooKeeper, two
   historicals, a broker without cache): each statement through the SQL API beside the same native
   query through the native API and DuckDB over the same Parquet files (median [min-max]).
3. A selection of every row through the SQL API: time to the first byte, total time and rows/s,
   the broker's resident memory before and at its peak during the read, beside DuckDB reading the
   same columns of the same files into Arrow.
Nothing is asserted: the figures are printed, then one JSON line.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import time
from collections.abc import Mapping, Sequence
from typing import Any

from strata.sql import plan_statement

COLUMNS = {"__time": "LONG", "channel": "STRING", "page": "STRING", "countryName": "STRING", "added": "LONG",
           "deleted": "LONG", "delta": "LONG", "user": "STRING"}  # fmt: skip
STATEMENTS = {
    "topN-shaped groupBy": 'SELECT page, COUNT(*) AS edits FROM wikipedia WHERE "__time" >= TIMESTAMP '
    "'2015-09-12 00:00:00' GROUP BY page ORDER BY edits DESC LIMIT 10",
    "timeseries by hour": "SELECT FLOOR(__time TO HOUR) AS h, SUM(added) FROM wikipedia GROUP BY 1",
    "filtered scan": "SELECT \"user\", page FROM wikipedia WHERE channel = '#en.wikipedia' AND added > 10 "
    "LIMIT 20",
    "superset series": 'SELECT TIME_FLOOR(CAST("__time" AS TIMESTAMP), \'PT1H\') AS "__timestamp", COUNT(*) '
    'AS "count" FROM "druid"."wikipedia" WHERE "__time" >= TIME_PARSE(\'2015-09-12T00:00:00\') GROUP BY '
    'TIME_FLOOR(CAST("__time" AS TIMESTAMP), \'PT1H\') ORDER BY "count" DESC LIMIT 10000',
}


class TablesCatalog:
    """A planner's catalog of these tables (name -> column -> Druid type), no segments or servers."""

    def __init__(self, tables: Mapping[str, Mapping[str, str]]) -> None:
        self._tables = tables

    def tables(self) -> Sequence[str]:
        return sorted(self._tables)

    def columns(self, table: str) -> Mapping[str, str] | None:
        return self._tables.get(table)

    def segments(self) -> list[dict[str, Any]]:
        return []

    def servers(self) -> list[dict[str, Any]]:
        return []


def planning(repeat: int) -> dict[str, Any]:
    catalog = TablesCatalog({"wikipedia": COLUMNS})
    out = {}
    for name, text in STATEMENTS.items():
        times = []
        for _ in range(repeat):
            started = time.perf_counter()
            plan_statement(text, catalog, {})
            times.append((time.perf_counter() - started) * 1e6)
        times.sort()
        p99 = times[int(len(times) * 0.99) - 1]
        out[name] = {"median_us": round(statistics.median(times)), "p99_us": round(p99)}
        print(f"{name:22} median {statistics.median(times):7.0f} us   p99 {p99:7.0f} us")
    return out


def _corpus_catalog() -> tuple[TablesCatalog, list[str]]:
    """Druid's quidem corpus (tests/sql_corpus): its statements, and a catalog of its tables with
    the types their ingestion specs give (dimensions STRING, metrics by aggregator)."""
    from pathlib import Path

    from tests.sql_corpus.runner import corpus_cases
    from tests.sql_corpus.skips import skip_reason

    tables: dict[str, dict[str, str]] = {}
    for spec_path in sorted(Path("tests/sql_corpus/tables").glob("*-index.json")):
        schema = json.loads(spec_path.read_text())["spec"]["dataSchema"]
        columns = {"__time": "LONG"}
        for dim in schema["dimensionsSpec"].get("dimensions", []):
            name, kind = (dim, "string") if isinstance(dim, str) else (dim["name"], dim.get("type", "string"))
            columns[name] = {"long": "LONG", "float": "FLOAT", "double": "DOUBLE"}.get(kind, "STRING")
        for metric in schema.get("metricsSpec", []):
            kind = metric["type"]
            columns[metric["name"]] = (
                "LONG" if kind == "count" or kind.startswith("long")
                else "FLOAT" if kind.startswith("float") else "DOUBLE"
            )  # fmt: skip
        tables[schema["dataSource"]] = columns

    statements = [c.sql for c in corpus_cases() if skip_reason(c) is None]
    return TablesCatalog(tables), statements


def corpus_planning(repeat: int) -> dict[str, Any]:
    """Planning time over every statement of the corpus (errors included: a refusal is planned too)."""
    catalog, statements = _corpus_catalog()
    times = []
    for _ in range(repeat):
        for text in statements:
            started = time.perf_counter()
            with contextlib.suppress(Exception):
                plan_statement(text, catalog, {})
            times.append((time.perf_counter() - started) * 1e6)
    times.sort()
    p99 = times[int(len(times) * 0.99) - 1]
    out = {"statements": len(statements), "median_us": round(statistics.median(times)), "p99_us": round(p99)}
    print(
        f"{'corpus (' + str(len(statements)) + ' stmts)':22} median {out['median_us']:7d} us   "
        f"p99 {out['p99_us']:7d} us   (target: p99 under 5 ms)"
    )
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=2000)
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--segments", type=int, default=100)
    ap.add_argument("--e2e-repeat", type=int, default=5)
    ap.add_argument("--planning-only", action="store_true")
    args = ap.parse_args(argv)
    report: dict[str, Any] = {"planning": planning(args.repeat)}
    report["corpus_planning"] = corpus_planning(max(1, args.repeat // 100))
    if not args.planning_only:
        from bench.sql_end_to_end import end_to_end

        report["end_to_end"] = end_to_end(args.rows, args.segments, args.e2e_repeat)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
