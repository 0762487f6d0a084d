"""An `auto` column's Druid type from its values in one segment, and its values in that type.

Druid's type-aware schema discovery, per segment, over the staged JSON text (DuckDB's JSON
functions, column-wise):

- only nulls: STRING;
- scalars only: LONG when all are integers or booleans (`true` is 1), DOUBLE when some are
  fractional, STRING when some are strings (numbers then as their JSON text, booleans as
  `true`/`false`);
- arrays of scalars (a scalar row becomes a one-element array): ARRAY<LONG>, ARRAY<DOUBLE> or
  ARRAY<STRING> by the same rule over the elements; only empty arrays and arrays holding only
  nulls: ARRAY<LONG> (Druid's `FieldTypeInfo` calls both untyped arrays, typed LONG when alone);
- any object, or an array holding arrays or objects: COMPLEX<json>.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import duckdb
import pyarrow as pa

from strata.ingestion.scratch_duck import scratch_connection
from strata.storage.segment_layout import (
    ARRAY_LONG,
    COMPLEX_JSON,
    DOUBLE,
    JSON_TYPE,
    LONG,
    STRING,
    arrow_type,
)

_INTEGRAL = {"BIGINT", "UBIGINT", "BOOLEAN"}
_NUMERIC = _INTEGRAL | {"DOUBLE"}
_CONTAINERS = {"ARRAY", "OBJECT"}


@contextmanager
def _connection(values: pa.Array) -> Iterator[duckdb.DuckDBPyConnection]:
    with scratch_connection() as con:
        storage = values.storage if isinstance(values, pa.ExtensionArray) else values
        con.register("segment", pa.table({"v": storage}))
        yield con


def _scalar_kind(kinds: set[str]) -> str:
    if kinds <= _INTEGRAL:
        return LONG
    if kinds <= _NUMERIC:
        return DOUBLE
    return STRING


def infer_type(values: pa.Array) -> str:
    """Druid's type of an `auto` column holding `values` (JSON text) in one segment."""
    with _connection(values) as con:
        rows = con.sql(
            "SELECT DISTINCT json_type(v::JSON) AS root,"
            " CASE WHEN json_type(v::JSON) = 'ARRAY' THEN json_type(v::JSON, '$[*]') END AS elements"
            " FROM segment WHERE v IS NOT NULL"
        ).fetchall()
    roots = {r for r, _ in rows} - {"NULL"}
    elements = {e for _, es in rows if es for e in es}
    if "OBJECT" in roots or elements & _CONTAINERS:
        return COMPLEX_JSON
    if "ARRAY" in roots:
        typed = (elements | roots) - {"ARRAY", "NULL"}
        if not typed:
            return ARRAY_LONG
        return f"ARRAY<{_scalar_kind(typed)}>"
    return _scalar_kind(roots) if roots else STRING


_NUMBER_SQL = (
    "CASE json_type({{e}}) WHEN 'BOOLEAN' THEN CAST({{e}}::BOOLEAN AS {t}) ELSE TRY_CAST({{e}} AS {t}) END"
)
_ELEMENT_SQL = {
    LONG: _NUMBER_SQL.format(t="BIGINT"),
    DOUBLE: _NUMBER_SQL.format(t="DOUBLE"),
    STRING: (
        "CASE json_type({e}) WHEN 'VARCHAR' THEN json_extract_string({e}, '$') WHEN 'NULL' THEN NULL"
        " ELSE CAST({e} AS VARCHAR) END"
    ),
}


def typed_values(values: pa.Array, column_type: str) -> pa.Array:
    """`values` (JSON text) as a column of `column_type` (from `infer_type`, or a promotion of it)."""
    if column_type == COMPLEX_JSON:
        return values if values.type == JSON_TYPE else pa.ExtensionArray.from_storage(JSON_TYPE, values)
    v = "v::JSON"
    if column_type.startswith("ARRAY<"):
        element = _ELEMENT_SQL[column_type[len("ARRAY<") : -1]].format(e="e")
        wrapped = f"CASE json_type({v}) WHEN 'ARRAY' THEN {v} ELSE json_array({v}) END"
        elements = f"list_transform(json_extract({wrapped}, '$[*]'), lambda e: {element})"
        sql = f"CASE WHEN v IS NULL THEN NULL ELSE {elements} END"
    else:
        sql = _ELEMENT_SQL[column_type].format(e=v)
    with _connection(values) as con:
        out = con.sql(f"SELECT {sql} AS v FROM segment").to_arrow_table().column("v").combine_chunks()
    return out.cast(arrow_type(column_type))


__all__ = ["infer_type", "typed_values"]
