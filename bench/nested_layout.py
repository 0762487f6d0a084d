"""The segment layout of multi-value strings, arrays and nested JSON, measured against alternatives.

    python -m bench.nested_layout [--rows 10000000] [--repeat 3]

The same rows are written as Parquet in several layouts, and DuckDB filters and groups each one,
from the Parquet file and from an in-memory Arrow table (as the historical scans its mapped
copies). Each query runs `--repeat` times; the median is printed. What it decided is in
docs/ingestion.md ("How a segment stores multi-value strings, arrays and nested values").

Multi-value strings (0-4 values a row from 1,000, some rows null):
- `list`: a Parquet list of strings (dictionary-encoded leaves), the chosen layout;
- `delimited`: one string a row, the values joined by U+001F, split at query time;
- `json`: the values as a JSON array in a string;
- `exploded`: one row per value with the row's number (a filter counts distinct row numbers).

Nested values (`{"a": {"b": LONG}, "c": STRING, "d": [LONG, LONG]}`):
- `json+paths`: the JSON text plus a typed column for each literal leaf path, the chosen layout;
- `json`: the JSON text only (`json_extract` at query time);
- `struct`: a Parquet struct (only possible when every row has the same shape).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

VOCABULARY = 1000
SEP = "\x1f"


def tag_lists(rows: int, rng: np.random.Generator) -> pa.ListArray:
    lengths = rng.integers(0, 5, rows)
    nulls = rng.random(rows) < 0.05
    lengths[nulls] = 0
    offsets = np.zeros(rows + 1, np.int32)
    np.cumsum(lengths, out=offsets[1:])
    ids = pa.array(rng.integers(0, VOCABULARY, int(offsets[-1])))
    values = pc.binary_join_element_wise("tag", pc.cast(ids, pa.string()), "")
    return pa.ListArray.from_arrays(pa.array(offsets), values, mask=pa.array(nulls))


def mv_layouts(rows: int, rng: np.random.Generator, out: Path) -> dict[str, Path]:
    tags = tag_lists(rows, rng)
    flat = pc.list_flatten(tags)
    parents = pc.list_parent_indices(tags)
    joined = pc.binary_join(tags, SEP)
    as_json = pc.binary_join_element_wise('["', pc.binary_join(tags, '","'), '"]', "")
    as_json = pc.if_else(pc.equal(pc.list_value_length(tags), 0), "[]", as_json)
    tables = {
        "list": pa.table({"tags": tags}),
        "delimited": pa.table({"tags": joined}),
        "json": pa.table({"tags": as_json}),
        "exploded": pa.table({"row": parents, "tag": flat}),
    }
    paths = {}
    for name, table in tables.items():
        paths[name] = out / f"mv-{name}.parquet"
        pq.write_table(table, paths[name], compression="zstd", row_group_size=128 * 1024)
    return paths


def nested_layouts(rows: int, rng: np.random.Generator, out: Path) -> dict[str, Path]:
    b = rng.integers(0, 1000, rows)
    c = ["c" + str(v) for v in rng.integers(0, 100, rows)]
    d = rng.integers(0, 50, (rows, 2))
    text = pa.array(
        [json.dumps({"a": {"b": int(x)}, "c": str(y), "d": [int(z[0]), int(z[1])]}, separators=(",", ":"))
         for x, y, z in zip(b, c, d, strict=True)],
        pa.string(),
    )  # fmt: skip
    d_list = pa.ListArray.from_arrays(
        pa.array(np.arange(0, 2 * rows + 1, 2, dtype=np.int32)), pa.array(d.ravel())
    )
    tables = {
        "json+paths": pa.table(
            {"doc": text, "doc.$.a.b": pa.array(b), "doc.$.c": pa.array(c), "doc.$.d": d_list}),
        "json": pa.table({"doc": text}),
        "struct": pa.table({"doc": pa.StructArray.from_arrays(
            [pa.StructArray.from_arrays([pa.array(b)], ["b"]), pa.array(c), d_list], ["a", "c", "d"])}),
    }  # fmt: skip
    paths = {}
    for name, table in tables.items():
        paths[name] = out / f"nested-{name}.parquet"
        pq.write_table(table, paths[name], compression="zstd", row_group_size=128 * 1024)
    return paths


_SPLIT = f"string_split(tags, '{SEP}')"
_PARSE = "CAST(tags AS JSON)::VARCHAR[]"
MV_QUERIES = {
    "filter": {
        "list": "SELECT count(*) FROM {src} WHERE list_contains(tags, 'tag7')"
                " OR list_contains(tags, 'tag42')",
        "list (list_has_any)": "SELECT count(*) FROM {src} WHERE list_has_any(tags, ['tag7', 'tag42'])",
        "delimited": f"SELECT count(*) FROM {{src}} WHERE list_has_any({_SPLIT}, ['tag7', 'tag42'])",
        "json": f"SELECT count(*) FROM {{src}} WHERE list_has_any({_PARSE}, ['tag7', 'tag42'])",
        "exploded": "SELECT count(DISTINCT row) FROM {src} WHERE tag IN ('tag7', 'tag42')",
    },
    "group": {
        "list": "SELECT t, count(*) FROM (SELECT unnest(tags) AS t FROM {src}) GROUP BY t",
        "list (list_has_any)": "SELECT t, count(*) FROM (SELECT unnest(tags) AS t FROM {src}) GROUP BY t",
        "delimited": f"SELECT t, count(*) FROM (SELECT unnest({_SPLIT}) AS t FROM {{src}}) GROUP BY t",
        "json": f"SELECT t, count(*) FROM (SELECT unnest({_PARSE}) AS t FROM {{src}}) GROUP BY t",
        "exploded": "SELECT tag, count(*) FROM {src} GROUP BY tag",
    },
}  # fmt: skip
NESTED_QUERIES = {
    "filter": {
        "json+paths": 'SELECT count(*) FROM {src} WHERE "doc.$.a.b" = 7',
        "json": "SELECT count(*) FROM {src} WHERE json_extract(doc, '$.a.b')::BIGINT = 7",
        "struct": "SELECT count(*) FROM {src} WHERE doc.a.b = 7",
    },
    "group": {
        "json+paths": 'SELECT "doc.$.c", count(*) FROM {src} GROUP BY 1',
        "json": "SELECT json_extract_string(doc, '$.c'), count(*) FROM {src} GROUP BY 1",
        "struct": "SELECT doc.c, count(*) FROM {src} GROUP BY 1",
    },
    "array": {
        "json+paths": 'SELECT count(*) FROM {src} WHERE list_contains("doc.$.d", 7)',
        "json": "SELECT count(*) FROM {src} WHERE list_contains(json_extract(doc, '$.d')::BIGINT[], 7)",
        "struct": "SELECT count(*) FROM {src} WHERE list_contains(doc.d, 7)",
    },
}  # fmt: skip


def _runner(con: duckdb.DuckDBPyConnection, sql: str) -> Callable[[], object]:
    return lambda: con.sql(sql).fetchall()


def _dictionary_leaves(table: pa.Table) -> pa.Table:
    """`table` with the strings inside its list columns dictionary-encoded (the `arrow-dict` copy)."""
    columns = []
    for col in table.columns:
        arr = col.combine_chunks()
        if pa.types.is_list(arr.type) and pa.types.is_string(arr.type.value_type):
            arr = pa.ListArray.from_arrays(
                arr.offsets, pc.dictionary_encode(arr.values), mask=pc.is_null(arr)
            )
        columns.append(arr)
    return pa.Table.from_arrays(columns, names=table.column_names)


def _median_ms(run: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        began = time.perf_counter()
        run()
        times.append((time.perf_counter() - began) * 1000)
    return statistics.median(times)


def measure(
    paths: dict[str, Path], queries: dict[str, dict[str, str]], repeat: int
) -> list[dict[str, object]]:
    """Median ms of each query over each layout: from Parquet, from Arrow in memory, and from Arrow
    with dictionary-encoded list leaves (with its answer when that differs from the Parquet one)."""
    con = duckdb.connect()
    results = []
    layouts = {  # a query variant ("list (list_has_any)") reads its layout's file ("list")
        name: paths[max((key for key in paths if name.startswith(key)), key=len)]
        for name in next(iter(queries.values()))
    }
    for layout, path in layouts.items():
        memory = pq.read_table(path)
        sources = {"parquet": f"read_parquet('{path}')", "arrow": "mem", "arrow-dict": "memd"}
        con.register("mem", memory)
        con.register("memd", _dictionary_leaves(memory))
        row: dict[str, object] = {"layout": layout, "bytes": path.stat().st_size}
        for query, by_layout in queries.items():
            answers = {}
            for where, src in sources.items():
                sql = by_layout[layout].format(src=src)
                row[f"{query} {where} ms"] = round(_median_ms(_runner(con, sql), repeat), 1)
                answers[where] = sorted(con.sql(sql).fetchall(), key=repr)
            if answers["arrow-dict"] != answers["parquet"]:
                row[f"{query} arrow-dict ms"] = f"{row[f'{query} arrow-dict ms']} (WRONG ANSWER)"
        con.unregister("mem")
        con.unregister("memd")
        results.append(row)
    con.close()
    return results


def _print(title: str, rows: list[dict[str, object]]) -> None:
    print(f"\n{title}")
    keys = list(rows[0])
    print(" | ".join(keys))
    for r in rows:
        print(" | ".join(str(r[k]) for k in keys))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.nested_layout", description=__doc__)
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--nested-rows", type=int, default=None, help="rows of the nested layouts (default --rows)"
    )
    args = parser.parse_args(argv)
    rng = np.random.default_rng(37)
    with tempfile.TemporaryDirectory(prefix="nested-layout-") as tmp:
        out = Path(tmp)
        mv = measure(mv_layouts(args.rows, rng, out), MV_QUERIES, args.repeat)
        _print(f"multi-value strings, {args.rows:,} rows", mv)
        nested_rows = args.nested_rows or args.rows
        nested = measure(nested_layouts(nested_rows, rng, out), NESTED_QUERIES, args.repeat)
        _print(f"nested values, {nested_rows:,} rows", nested)
    print(json.dumps({"mv": mv, "nested": nested}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
