"""segmentMetadata over segments: column types, null flags, cardinality and min/max (one scan for
every segment), sizes from the Parquet footer, and the ingestion facts stored in it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import duckdb
import orjson
import pyarrow as pa

from strata.engine.footer import read_footer
from strata.engine.memory_source import column_sizes, is_memory
from strata.engine.registry import executes
from strata.engine.segment_input import SegmentInput, read_schema, scan_relation
from strata.query.base import SEGMENT_COLUMN
from strata.query.columns import TIME_COLUMN
from strata.query.duck import MULTI_VALUE, quote_ident
from strata.query.segment_metadata import ANALYSIS_COLUMN, SegmentMetadataQuery, combining_aggregator
from strata.storage.segment_layout import multi_value_columns


@executes(SegmentMetadataQuery)
def run_partials(
    query: SegmentMetadataQuery, conn: duckdb.DuckDBPyConnection, inputs: Sequence[SegmentInput]
) -> pa.Table:
    schemas = {i.segment_id: read_schema(i.path) for i in inputs}
    included = {
        sid: [c for c in s.columns if query.to_include is None or c in query.to_include]
        for sid, s in schemas.items()
    }
    stats = column_stats(conn, inputs, included, values=query.wants("cardinality") or query.wants("minmax"))
    analyses = []
    for inp in inputs:
        schema = schemas[inp.segment_id]
        sizes = column_sizes_of(inp.path) if query.wants("size") else {}
        multi_value = multi_value_columns(schema.extra)
        columns = {
            c: query.column_analysis(
                c,
                schema.columns[c],
                stats.get((inp.segment_id, c), {}),
                sizes.get(c, 0),
                schema.druid_types.get(c),
                c in multi_value,
            )
            for c in included[inp.segment_id]
        }
        analyses.append(
            {
                "id": inp.segment_id,
                "intervals": [str(inp.descriptor.interval)] if query.wants("interval") else None,
                "columns": columns,
                "size": sum(sizes.values()) if query.wants("size") else 0,
                "numRows": schema.num_rows,
                "aggregators": (
                    {m["name"]: combining_aggregator(m) for m in schema.metrics if "name" in m}
                    if query.wants("aggregators")
                    else None
                ),
                "timestampSpec": None,
                "queryGranularity": schema.query_granularity if query.wants("queryGranularity") else None,
                "rollup": schema.rollup if query.wants("rollup") else None,
            }
        )
    return pa.table(
        {
            SEGMENT_COLUMN: pa.array([a["id"] for a in analyses], pa.string()),
            ANALYSIS_COLUMN: pa.array([orjson.dumps(a).decode() for a in analyses], pa.string()),
        }
    )


def column_stats(
    conn: duckdb.DuckDBPyConnection,
    inputs: Sequence[SegmentInput],
    included: Mapping[str, list[str]],
    *,
    values: bool = True,
) -> dict[tuple[str, str], dict[str, Any]]:
    """Null flags per (segment, column), with `values` their distinct counts and min/max too, in one
    pass over the files. Without `values` (no cardinality or minmax analysis: a SQL catalog's
    refresh asks for column types only) a null flag comes from the file's own statistics where it
    has them, and only the rest are scanned: counting distinct strings over every row of every
    segment is most of such a query's work."""
    out: dict[tuple[str, str], dict[str, Any]] = {} if values else _footer_null_flags(inputs, included)
    left = {
        sid: [c for c in cols if c != TIME_COLUMN and (sid, c) not in out] for sid, cols in included.items()
    }
    inputs = [i for i in inputs if left.get(i.segment_id)]
    columns = list(dict.fromkeys(c for i in inputs for c in left[i.segment_id]))
    if not inputs or not columns:
        return out
    # Whole segments: metadata describes the segment, not the query's slice of it.
    whole = [SegmentInput(i.segment_id, i.descriptor, i.path, i.descriptor.interval) for i in inputs]
    relation, types = scan_relation(whole, columns)
    selects = [SEGMENT_COLUMN]
    for i, c in enumerate(columns):
        ident = quote_ident(c)
        selects.append(f"bool_or({ident} IS NULL) AS n{i}")
        if values and types[c] in ("VARCHAR", MULTI_VALUE):
            if types[c] == "VARCHAR":
                selects += [
                    f"count(DISTINCT {ident}) AS d{i}",
                    f"min({ident}) AS lo{i}",
                    f"max({ident}) AS hi{i}",
                ]
            else:  # a multi-value string: over its values
                flat = f"flatten(list({ident}))"
                selects += [f"len(list_distinct({flat})) AS d{i}", f"list_min({flat}) AS lo{i}",
                            f"list_max({flat}) AS hi{i}"]  # fmt: skip
    sql = f"SELECT {', '.join(selects)} FROM ({relation}) GROUP BY {SEGMENT_COLUMN}"
    result = conn.sql(sql).to_arrow_table().to_pylist()
    for row in result:
        for i, c in enumerate(columns):
            if (row[SEGMENT_COLUMN], c) in out:
                continue
            stat = {"hasNulls": bool(row[f"n{i}"])}
            if values and types[c] in ("VARCHAR", MULTI_VALUE):
                stat.update(distinct=row[f"d{i}"], min=row[f"lo{i}"], max=row[f"hi{i}"])
            out[(row[SEGMENT_COLUMN], c)] = stat
    return out


def _footer_null_flags(
    inputs: Sequence[SegmentInput], included: Mapping[str, list[str]]
) -> dict[tuple[str, str], dict[str, Any]]:
    """The null flags a segment file's statistics give (a multi-value column's, stored as lists,
    and a real-time segment's in memory need a scan)."""
    flags: dict[tuple[str, str], dict[str, Any]] = {}
    for inp in inputs:
        if is_memory(inp.path):
            continue
        footer = read_footer(inp.path)
        for c in included.get(inp.segment_id, []):
            nulls = footer.null_count(c) if c != TIME_COLUMN else None
            if nulls is not None:
                flags[(inp.segment_id, c)] = {"hasNulls": nulls > 0}
    return flags


def column_sizes_of(path: str) -> dict[str, int]:
    """Compressed bytes of each column in the file (Druid estimates a column's size similarly)."""
    if is_memory(path):
        return column_sizes(path)
    return read_footer(path).column_sizes()
