"""Filtering and grouping on a multi-value string and an ARRAY column (issue 37 item 7), through a
real historical and broker, beside DuckDB over the same Parquet files.

    python -m bench.multi_value [--rows 10000000] [--segments 24] [--repeat 5] [--only "ARRAY groupBy"]
                                [--client-collector paused]

`--rows` rows in `--segments` hourly segments written straight into deep storage in the segment
layout (`tags`: a multi-value STRING, 0-4 values a row of 1,000, sorted, as bench.nested_layout;
`nums`: an ARRAY<LONG> of 0-4 elements of 100; `added`: LONG), served by one `strata historical`
(Arrow copies) and a `strata broker` without cache. Each shape is a native query (cache off)
beside the same question in DuckDB SQL over `read_parquet` of the segment files, set up as an
expert would (threads = cores, footers cached); where DuckDB has two ways to say it (`list_has_any`
or an OR of `list_has`) the faster is the baseline. Medians of `--repeat`, then each ratio against
issue 37's 1.5x target and one JSON line. The answers are compared (totals, top groups) first.
Beside the issue's whole-array groupBy (Druid's default rows, JSON objects) the same answer runs in
the two shapes of rows as arrays Druid offers a client: the native `resultAsArray` context and
SQL's `resultFormat: array` (an array as its JSON text, Druid's `sqlStringifyArrays` default), and
in SQL's default `resultFormat: object`.

Both clients build Python rows: Strata's parses the JSON answer (orjson), DuckDB's `fetchall`s.
With millions of rows, CPython's cyclic collector walks every live object again and again as they
grow (at 706,239 groups: 7.5-12.5 s of CPU parsing with it, 1.45 s without; DuckDB's `fetchall`
2.4-3.3 s against 1.5-1.7 s), so `--client-collector paused` pauses it in both clients alike around
each call, as Strata's broker does while it builds rows (strata.query.collector): the engines'
times without the client runtime's collections. The default runs it, as a plain client does.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa

from bench.cluster_setup import (
    HOUR_MS,
    START_MS,
    Dataset,
    cluster,
    duckdb_baseline,
    wait_for_segments,
    write_hourly,
)
from bench.measure import QueryConnection, cpu_seconds, log, time_calls
from bench.nested_layout import tag_lists
from harness.memory import children
from strata.query.collector import collector_paused

TARGET = 1.5
NO_CACHE = {"useCache": False, "populateCache": False, "useResultLevelCache": False,
            "populateResultLevelCache": False}  # fmt: skip
DIMS: list[dict[str, Any]] = [
    {"name": "tags", "type": "string", "columnType": "STRING", "multiValue": True},
    {"name": "nums", "type": "auto", "columnType": "ARRAY<LONG>"},
]
METRICS = [{"type": "longSum", "name": "added", "fieldName": "added"}]
AGGS = [{"type": "count", "name": "rows"}, {"type": "longSum", "name": "added", "fieldName": "added"}]
IN_TAGS = ["tag1", "tag20", "tag300"]


def rows_table(rows: int, segments: int, seed: int = 37) -> pa.Table:
    """The rows, sorted by time; a multi-value row's values sorted, no value null (the layout)."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, 5, rows)
    offsets = np.zeros(rows + 1, np.int32)
    np.cumsum(lengths, out=offsets[1:])
    elements = pa.array(rng.integers(0, 100, int(offsets[-1])))
    generated = pa.table({  # DuckDB reads it by name
        "__time": pa.array(np.sort(START_MS + rng.integers(0, segments * HOUR_MS, rows))),
        "tags": tag_lists(rows, rng),
        "nums": pa.ListArray.from_arrays(pa.array(offsets), elements, mask=pa.array(rng.random(rows) < 0.05)),
        "added": pa.array(rng.integers(0, 1000, rows), pa.int64()),
    })  # fmt: skip
    shaped = duckdb.sql(
        "SELECT CASE WHEN len(tags) > 0 THEN list_sort(tags) END AS tags, nums, added FROM generated"
    ).to_arrow_table()
    return shaped.add_column(0, "__time", generated.column("__time").cast(pa.timestamp("ms", tz="UTC")))


def rows_arguments(about: str | None) -> argparse.ArgumentParser:
    """The flags of a benchmark over these rows: `--rows`, `--segments`, `--repeat`."""
    ap = argparse.ArgumentParser(description=about, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--segments", type=int, default=24)
    ap.add_argument("--repeat", type=int, default=3)
    return ap


def shapes(ds: Dataset) -> dict[str, tuple[dict[str, Any], list[str]]]:
    """Native query and DuckDB SQL (one or more ways to say it) per shape."""
    src = f"read_parquet({ds.parquet_list()})"
    base = {"dataSource": ds.name, "intervals": [ds.interval], "granularity": "all", "context": NO_CACHE,
            "aggregations": AGGS}  # fmt: skip
    total = "count(*), sum(added)"
    in_any = "list_has_any(tags, [" + ", ".join(f"'{t}'" for t in IN_TAGS) + "])"
    in_or = " OR ".join(f"list_has(tags, '{t}')" for t in IN_TAGS)
    exploded_tags = (
        f"(SELECT unnest(CASE WHEN tags IS NULL THEN [NULL] ELSE tags END) AS tag, added FROM {src})"
    )
    selector = {"type": "selector", "dimension": "tags", "value": "tag7"}
    contains = {
        "type": "arrayContainsElement",
        "column": "nums",
        "elementMatchValueType": "LONG",
        "elementMatchValue": 7,
    }
    whole = {"type": "default", "dimension": "nums", "outputName": "nums", "outputType": "ARRAY<LONG>"}
    unnest = {
        "type": "unnest",
        "base": {"type": "table", "name": ds.name},
        "virtualColumn": {
            "type": "expression",
            "name": "n",
            "expression": "nums",
            "outputType": "ARRAY<LONG>",
        },
    }
    return {
        "MV filter =": (
            {**base, "queryType": "timeseries", "filter": selector},
            [f"SELECT {total} FROM {src} WHERE list_has(tags, 'tag7')"],
        ),
        "MV filter in(3)": (
            {**base, "queryType": "timeseries", "filter": {"type": "in", "dimension": "tags",
                                                           "values": IN_TAGS}},
            [f"SELECT {total} FROM {src} WHERE {in_any}", f"SELECT {total} FROM {src} WHERE {in_or}"],
        ),
        "MV groupBy": (
            {**base, "queryType": "groupBy", "dimensions": ["tags"]},
            [f"SELECT tag, {total} FROM {exploded_tags} GROUP BY tag"],
        ),
        # Druid's topN cuts each segment to its best minTopNThreshold (1,000) values, so with 1,001
        # (1,000 tags and null) near-equal counts its top 10 can differ from DuckDB's exact LIMIT:
        # a threshold above the values per segment makes Druid's answer exact, and comparable
        "MV topN x10": (
            {**base, "queryType": "topN", "dimension": "tags", "metric": "rows", "threshold": 10,
             "context": {**NO_CACHE, "minTopNThreshold": 2000}},
            [f"SELECT tag, {total} AS c FROM {exploded_tags} GROUP BY tag ORDER BY 2 DESC LIMIT 10"],
        ),
        "ARRAY filter contains": (
            {**base, "queryType": "timeseries", "filter": contains},
            [f"SELECT {total} FROM {src} WHERE list_has(nums, 7)"],
        ),
        "ARRAY groupBy": (
            {**base, "queryType": "groupBy", "dimensions": [whole]},
            [f"SELECT nums, {total} FROM {src} GROUP BY nums"],
        ),
        # the same answer in the row shapes Druid offers beside the (JSON objects): rows as
        # arrays (fewer bytes, two containers a row instead of three), natively and in SQL
        "ARRAY groupBy resultAsArray": (
            {**base, "queryType": "groupBy", "dimensions": [whole],
             "context": {**NO_CACHE, "resultAsArray": True}},
            [f"SELECT nums, {total} FROM {src} GROUP BY nums"],
        ),
        "ARRAY groupBy SQL array": (
            {"query": f'SELECT nums, COUNT(*) AS "rows", SUM(added) AS added FROM "{ds.name}" GROUP BY nums',
             "resultFormat": "array", "context": NO_CACHE},
            [f"SELECT nums, {total} FROM {src} GROUP BY nums"],
        ),
        "ARRAY groupBy SQL object": (  # Druid SQL's default resultFormat, as pydruid's DB-API reads it
            {"query": f'SELECT nums, COUNT(*) AS "rows", SUM(added) AS added FROM "{ds.name}" GROUP BY nums',
             "context": NO_CACHE},
            [f"SELECT nums, {total} FROM {src} GROUP BY nums"],
        ),
        "ARRAY unnest groupBy": (
            {**base, "queryType": "groupBy", "dataSource": unnest,
             "dimensions": [{"type": "default", "dimension": "n", "outputType": "LONG"}]},
            [f"SELECT n, {total} FROM (SELECT unnest(nums) AS n, added FROM {src}) GROUP BY n"],
        ),
    }  # fmt: skip


def row_total(native: Any) -> int:
    """Rows counted by a native answer (timeseries, topN or groupBy) or a SQL one in arrays."""
    if native and isinstance(native[0], list):  # rows as arrays: the count before the sum
        return sum(r[-2] for r in native)
    if native and "rows" in native[0]:  # SQL rows as objects
        return sum(r["rows"] for r in native)
    if native and "result" in native[0]:
        result = native[0]["result"]
        return sum(e["rows"] for e in result) if isinstance(result, list) else int(result["rows"])
    return sum(e["event"]["rows"] for e in native)


def endpoint(body: dict[str, Any]) -> str:
    """Where a shape's body is posted: Druid's SQL endpoint for a SQL statement, else the native one."""
    return "/druid/v2/sql" if "query" in body else "/druid/v2/"


def _servers_cpu(pids: list[int]) -> float:
    """CPU seconds so far of the servers and their worker processes (a broker's merge workers)."""
    return sum(cpu_seconds(p) for pid in pids for p in [pid, *children(pid)])


def _cpu_per_call(fn: Callable[[], object], repeat: int, pids: list[int]) -> tuple[list[float], float, float]:
    """Wall seconds of each call, and the servers' and this process's CPU seconds per call."""
    servers, own = _servers_cpu(pids), time.process_time()
    walls = time_calls(fn, repeat, warmup=0)
    return walls, (_servers_cpu(pids) - servers) / repeat, (time.process_time() - own) / repeat


def _paused(fn: Callable[[], object]) -> Callable[[], object]:
    def call() -> object:
        with collector_paused():
            return fn()

    return call


def measure(
    url: str,
    ds: Dataset,
    repeat: int,
    only: list[str] | None = None,
    pids: list[int] | None = None,
    paused: bool = False,
) -> list[dict[str, Any]]:
    """Each shape's medians; `paused`: both clients with the cyclic collector paused in each call."""
    wrap = _paused if paused else (lambda fn: fn)
    conn = duckdb_baseline()
    conn.execute(f"SET threads = {os.cpu_count()}")
    strata = QueryConnection(url)
    out = []
    try:
        for name, (native, sqls) in shapes(ds).items():
            if only and name not in only:
                continue
            post = functools.partial(strata.post, native, endpoint(native))
            answer = post()
            rows = [conn.execute(sql).fetchall() for sql in sqls]
            expected = sum(r[-2] for r in rows[0]) if "groupBy" in name or "topN" in name else rows[0][0][0]
            if row_total(answer) != expected or any(
                sorted(map(str, r)) != sorted(map(str, rows[0])) for r in rows
            ):
                raise RuntimeError(f"{name}: Strata counted {row_total(answer)} rows, DuckDB {expected}")
            # the check's answers go before the timing: millions of live rows would make each of
            # either client's collections walk them again (a client does not keep its last answer)
            del answer, rows
            ours, servers_cpu, client_cpu = _cpu_per_call(wrap(post), repeat, pids or [])
            theirs, _, duck_cpu = min(
                (_cpu_per_call(wrap(_runner(conn, sql)), repeat, []) for sql in sqls),
                key=lambda m: statistics.median(m[0]),
            )
            ratio = statistics.median(ours) / statistics.median(theirs)
            out.append({"shape": name, "strata_ms": round(statistics.median(ours) * 1e3, 1),
                        "duckdb_ms": round(statistics.median(theirs) * 1e3, 1), "ratio": round(ratio, 2),
                        "within_1.5x": ratio <= TARGET, "strata_servers_cpu_s": round(servers_cpu, 2),
                        "strata_client_cpu_s": round(client_cpu, 2),
                        "duckdb_cpu_s": round(duck_cpu, 2),
                        "client_collector": "paused" if paused else "running"})  # fmt: skip
            log(f"{name:28} strata {out[-1]['strata_ms']:9.1f} ms  duckdb {out[-1]['duckdb_ms']:9.1f} ms  "
                f"{ratio:5.2f}x {'ok' if ratio <= TARGET else 'PAST 1.5x'}; CPU a query: servers "
                f"{servers_cpu:.2f} s + client {client_cpu:.2f} s, DuckDB {duck_cpu:.2f} s")  # fmt: skip
    finally:
        strata.close()
    return out


def _runner(conn: duckdb.DuckDBPyConnection, sql: str) -> Callable[[], object]:
    return lambda: conn.execute(sql).fetchall()


@contextlib.contextmanager
def _profiled(into: Path | None, pids: dict[str, int]) -> Iterator[None]:
    """py-spy recording each process while the block runs (nothing without `into`)."""
    if into is None:
        yield
        return
    into.mkdir(parents=True, exist_ok=True)
    py_spy = str(Path(sys.executable).with_name("py-spy"))
    spies = [
        subprocess.Popen([py_spy, "record", "--pid", str(pid), "--subprocesses", "--format", "raw",
                          "--rate", "50", "--output", str(into / f"{name}.txt"), "--nonblocking"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for name, pid in pids.items()
    ]  # fmt: skip
    try:
        yield
    finally:
        for spy in spies:
            spy.send_signal(signal.SIGINT)  # py-spy writes its stacks and exits
        for spy in spies:
            spy.wait(timeout=60)
        for name in pids:
            log(f"profile of the {name}: {into / f'{name}.txt'}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--segments", type=int, default=24)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--dir", type=Path, default=None, help="work directory (a temporary one by default)")
    ap.add_argument("--only", action="append", metavar="SHAPE", help="measure this shape only (repeatable)")
    ap.add_argument("--profile", type=Path, help="record the broker (with its merge workers) and the "
                    "historical with py-spy into this directory (collapsed stacks)")  # fmt: skip
    ap.add_argument("--client-collector", choices=["running", "paused"], default="running",
                    help="CPython's cyclic collector in both clients in each call (see above)")  # fmt: skip
    args = ap.parse_args(argv)
    with cluster(args.dir) as c:
        log(f"writing {args.rows:,} rows in {args.segments} hourly segments")
        ds = write_hourly(c.root, "mv", rows_table(args.rows, args.segments), args.segments, DIMS, METRICS)
        c.start_data_nodes(1)
        broker = c.start_broker("--cache", "none")
        wait_for_segments(broker, args.segments, nodes=c.historicals)
        pids = [broker.pid, *(h.pid for h in c.historicals)]
        with _profiled(args.profile, {"broker": broker.pid, "historical": c.historicals[0].pid}):
            results = measure(broker.url, ds, args.repeat, args.only, pids, args.client_collector == "paused")
    cores = os.cpu_count()
    print(f"{'shape':28} {'Strata ms':>10} {'DuckDB ms':>10} {'ratio':>6}  (target {TARGET}x; {cores} cores)")
    for r in results:
        print(f"{r['shape']:28} {r['strata_ms']:10.1f} {r['duckdb_ms']:10.1f} {r['ratio']:6.2f}"
              f"  {'ok' if r['within_1.5x'] else 'past the target'}")  # fmt: skip
    print(json.dumps({"rows": args.rows, "segments": args.segments, "shapes": results}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
