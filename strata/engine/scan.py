"""scan over segment rows: the selected columns of matching rows, ordered and capped per request."""

from __future__ import annotations

from collections.abc import Sequence

import duckdb
import pyarrow as pa

from strata.engine.registry import executes
from strata.engine.relation import filtered_relation
from strata.engine.segment_input import SegmentInput, read_schema
from strata.engine.wrapped_source import produced_columns
from strata.query.base import SEGMENT_COLUMN
from strata.query.columns import TIME_COLUMN
from strata.query.druid_types import mark_types
from strata.query.duck import quote_ident
from strata.query.scan import ScanQuery, with_columns_metadata


def segment_columns(inputs: Sequence[SegmentInput]) -> dict[str, list[str]]:
    """Each segment's own columns in Druid's order: `__time`, dimensions, then metrics."""
    out: dict[str, list[str]] = {}
    for inp in inputs:
        schema = read_schema(inp.path)
        named = list(schema.dimensions) + [m["name"] for m in schema.metrics if "name" in m]
        rest = [c for c in schema.columns if c not in named and c != TIME_COLUMN]
        out[inp.segment_id] = [TIME_COLUMN, *[c for c in named if c in schema.columns], *rest]
    return out


UNNAMED = "__strata_unnamed_column"  # stands for the column "" inside DuckDB (no segment has it)


@executes(ScanQuery)
def run_partials(
    query: ScanQuery, conn: duckdb.DuckDBPyConnection, inputs: Sequence[SegmentInput]
) -> pa.Table:
    own_columns = segment_columns(inputs) if not query.columns else {}
    if query.columns:
        # "" names no column (SQL cannot spell it): read as one no segment has, null, as Druid answers
        wanted = [c or UNNAMED for c in query.columns if c != TIME_COLUMN]
    else:
        wanted = list(dict.fromkeys(c for cols in own_columns.values() for c in cols[1:]))
        wanted += sorted(produced_columns(query.source) - set(wanted))
        own_columns = {
            s: [*cols, *sorted(produced_columns(query.source) - set(cols))] for s, cols in own_columns.items()
        }
    relation, types = filtered_relation(
        inputs, wanted, query.filter, virtual=query.virtual_columns, source=query.source
    )
    labels = [SEGMENT_COLUMN] if query.context.segment_labels else []  # ~80 bytes a row otherwise
    projection = ", ".join([*labels, TIME_COLUMN, *map(quote_ident, wanted)])
    sql = f"SELECT {projection} FROM ({relation})"
    if query.order != "none":
        sql += f" ORDER BY {TIME_COLUMN} {'DESC' if query.order == 'descending' else 'ASC'}"
    if query.row_cap is not None:
        sql += f" LIMIT {query.row_cap}"
    table = mark_types(conn.sql(sql).to_arrow_table(), types)
    if UNNAMED in wanted:
        table = table.rename_columns(["" if name == UNNAMED else name for name in table.column_names])
    return with_columns_metadata(table, own_columns)
