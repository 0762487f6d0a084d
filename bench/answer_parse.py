"""What a Python client's parse of the whole-array groupBy's answer costs, per row shape and parser
(issue 37 item 7): the stage after the last byte, which no server change shortens.

    python -m bench.answer_parse [--rows 10000000] [--segments 24] [--repeat 3]

The groups are bench.multi_value's (DuckDB's `GROUP BY nums` over the same generated rows), written
as Druid writes them: its default rows (`{"version","timestamp","event":{...}}`, the issue's
shape), rows as arrays (the native `resultAsArray` context; granularity `all` has no timestamp)
and SQL's `resultFormat: array` (an array as its JSON text, Druid's `sqlStringifyArrays`
default). Each body is parsed whole in a fresh process, as clients do: `json.loads` (pydruid's
`PyDruid` reads the response and `json.loads` it; `requests`' `Response.json()` is `json.loads`,
or simplejson's when installed), `orjson.loads` (this repository's benchmark client), each with
CPython's cyclic collector running (a plain client) and paused. CPU seconds of the parse alone;
the rows are built, not freed. Beside: DuckDB's whole query over the rows written as one Parquet
file, grouping and `fetchall` (its client's rows: a tuple and a list each), fresh process too.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import duckdb
import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from bench.measure import log
from bench.multi_value import rows_arguments, rows_table

SHAPES = ("objects", "resultAsArray", "SQL array")
PARSERS = ("json", "orjson")
GROUP_BY = 'SELECT nums, count(*) AS "rows", CAST(sum(added) AS BIGINT) AS added FROM {source} GROUP BY nums'
TIMESTAMP = "2026-11-01T00:00:00.000Z"


def bodies(generated: pa.Table) -> dict[str, bytes]:
    """The answer's JSON in each row shape (groups in DuckDB's order: the bytes, not the order, cost)."""
    groups = duckdb.sql(GROUP_BY.format(source="generated")).to_arrow_table()
    nums, counts, sums = (groups.column(c).to_pylist() for c in ("nums", "rows", "added"))
    events = [{"nums": n, "rows": c, "added": s} for n, c, s in zip(nums, counts, sums, strict=True)]
    return {
        "objects": orjson.dumps([{"version": "v1", "timestamp": TIMESTAMP, "event": e} for e in events]),
        "resultAsArray": orjson.dumps([[n, c, s] for n, c, s in zip(nums, counts, sums, strict=True)]),
        "SQL array": orjson.dumps(
            [
                [None if n is None else json.dumps(n, separators=(",", ":")), c, s]
                for n, c, s in zip(nums, counts, sums, strict=True)
            ]
        ),
    }


_CHILD = """
import gc, sys, time
import {module}
data = open(sys.argv[1], "rb").read()
if sys.argv[2] == "paused":
    gc.disable()
began = time.process_time()
rows = {module}.loads(data)
print(time.process_time() - began, len(rows))
"""

_DUCKDB_CHILD = """
import gc, sys, time
import duckdb
conn = duckdb.connect()
conn.execute("SET enable_progress_bar = false")  # it prints to stdout past two seconds
if sys.argv[2] == "paused":
    gc.disable()
began = time.process_time()
rows = conn.execute(sys.argv[3]).fetchall()
print(time.process_time() - began, len(rows))
"""


def _child(code: str, *args: str) -> tuple[float, int]:
    out = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=1800, check=True
    )
    seconds, count = out.stdout.splitlines()[-1].split()
    return float(seconds), int(count)


def _median(
    shape: str, parser: str, collector: str, mb: float, runs: list[tuple[float, int]]
) -> dict[str, Any]:
    cpu = round(statistics.median(r[0] for r in runs), 2)
    row = {
        "shape": shape,
        "parser": parser,
        "collector": collector,
        "mb": mb,
        "rows": runs[0][1],
        "cpu_s": cpu,
    }
    log(json.dumps(row))
    return row


def main(argv: list[str] | None = None) -> int:
    args = rows_arguments(__doc__).parse_args(argv)
    log(f"grouping {args.rows:,} rows")
    generated = rows_table(args.rows, args.segments)
    answers = bodies(generated)
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as work:
        path = Path(work) / "body.json"
        for shape, body in answers.items():
            path.write_bytes(body)
            mb = round(len(body) / 1e6, 1)
            for parser in PARSERS:
                for collector in ("running", "paused"):
                    code = _CHILD.format(module=parser)
                    runs = [_child(code, str(path), collector) for _ in range(args.repeat)]
                    results.append(_median(shape, parser, collector, mb, runs))
        table = Path(work) / "generated.parquet"
        pq.write_table(generated, table)
        sql = GROUP_BY.format(source=f"read_parquet('{table}')")
        for collector in ("running", "paused"):
            runs = [_child(_DUCKDB_CHILD, str(table), collector, sql) for _ in range(args.repeat)]
            results.append(_median("DuckDB fetchall", "-", collector, 0.0, runs))
    print(f"{'shape':16} {'parser':7} {'collector':9} {'MB':>6} {'rows':>10} {'CPU s':>6}")
    for r in results:
        line = f"{r['shape']:16} {r['parser']:7} {r['collector']:9} {r['mb']:6.1f} {r['rows']:10,}"
        print(f"{line} {r['cpu_s']:6.2f}")
    print(json.dumps({"rows": args.rows, "load": os.getloadavg(), "parses": results}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
