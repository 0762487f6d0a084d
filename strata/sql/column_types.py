"""Druid column types as Druid SQL sees them, and as the broker's relational engine holds them.

The catalog keeps each column's Druid type as segmentMetadata reports it (`typeSignature`), with
one addition: a STRING column some segment stores with several values a row is
`MULTI_VALUE_STRING`. Druid SQL types that column VARCHAR and plans it as one (the native engine
applies the multi-value rules), so the native planner reads it as STRING (`planner_type`); the
broker's DuckDB holds its rows as lists of strings, what its MV_ functions take
(`relational_type`). INFORMATION_SCHEMA reports ARRAY columns as `ARRAY` and nested ones as
`COMPLEX<json>`, as Druid does.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from strata.query.druid_types import MULTI_VALUE_STRING

_SQL = {
    "STRING": "VARCHAR",
    "LONG": "BIGINT",
    "FLOAT": "FLOAT",
    "DOUBLE": "DOUBLE",
    MULTI_VALUE_STRING: "VARCHAR",
}
_RELATIONAL = {
    "STRING": "VARCHAR",
    "LONG": "BIGINT",
    "FLOAT": "FLOAT",
    "DOUBLE": "DOUBLE",
    MULTI_VALUE_STRING: "ARRAY<VARCHAR>",
    "ARRAY<STRING>": "ARRAY<VARCHAR>",
    "ARRAY<LONG>": "ARRAY<BIGINT>",
    "ARRAY<DOUBLE>": "ARRAY<DOUBLE>",
    "COMPLEX<json>": "JSON",
}
JDBC_TYPES = {
    "VARCHAR": 12,
    "BIGINT": -5,
    "DOUBLE": 8,
    "FLOAT": 6,
    "TIMESTAMP": 93,
    "BOOLEAN": 16,
    "INTEGER": 4,
    "ARRAY": 2003,
    "OTHER": 1111,
}


_MERGE_ERROR = re.compile(r"^error:cannot_merge_diff_types: \[(.+)\] and \[(.+)\]$")
_NUMBER_RANK = {"LONG": 1, "FLOAT": 2, "DOUBLE": 3}


def catalog_type(analysis: Mapping[str, Any]) -> str:
    """A column's type from its (merged) segmentMetadata analysis: its type signature, a STRING
    with several values in some segment as MULTI_VALUE_STRING, and two types segments disagree
    on unified as Druid's broker unifies them."""
    kind = str(analysis.get("typeSignature") or analysis.get("type") or "STRING")
    found = _MERGE_ERROR.match(kind)
    if found:
        kind = least_restrictive(found.group(1), found.group(2))
    if kind == "STRING" and analysis.get("hasMultipleValues"):
        return MULTI_VALUE_STRING
    return kind


def least_restrictive(a: str, b: str) -> str:
    """The type holding values of both: numbers widen, a scalar beside an array of its kind is
    that array, COMPLEX<json> holds anything, any other mix is STRING."""
    if a == b:
        return a
    if "COMPLEX<json>" in (a, b):
        return "COMPLEX<json>"
    if a in _NUMBER_RANK and b in _NUMBER_RANK:
        return max(a, b, key=_NUMBER_RANK.__getitem__)
    if is_array_type(a) or is_array_type(b):
        element = least_restrictive(a[6:-1] if is_array_type(a) else a, b[6:-1] if is_array_type(b) else b)
        return f"ARRAY<{element}>"
    return "STRING"


def is_array_type(druid: str) -> bool:
    return druid.startswith("ARRAY<")


def planner_type(druid: str) -> str:
    """The type the native planner reads: a multi-value string is a STRING."""
    return "STRING" if druid == MULTI_VALUE_STRING else druid


def sql_type_name(druid: str) -> str:
    """The SQL type Druid reports for a column of Druid type `druid` (INFORMATION_SCHEMA, headers)."""
    if is_array_type(druid):
        return "ARRAY"
    if druid.startswith("COMPLEX<"):
        return druid if druid == "COMPLEX<json>" else "OTHER"
    return _SQL.get(druid, "VARCHAR")


def jdbc_type(sql_type: str) -> int:
    return JDBC_TYPES.get(sql_type, JDBC_TYPES["OTHER"] if sql_type.startswith("COMPLEX") else 12)


def relational_type(druid: str) -> str:
    """The SQL type (sqlglot's spelling) of the column's values in the broker's DuckDB."""
    return _RELATIONAL.get(druid, "VARCHAR")


def relational_arrow_type(druid: str) -> pa.DataType:
    """The Arrow type the broker hands DuckDB a column's values as."""
    if druid in (MULTI_VALUE_STRING, "ARRAY<STRING>"):
        return pa.list_(pa.string())
    if druid == "ARRAY<LONG>":
        return pa.list_(pa.int64())
    if druid == "ARRAY<DOUBLE>":
        return pa.list_(pa.float64())
    if druid == "COMPLEX<json>":
        return pa.json_(pa.string())
    return {"LONG": pa.int64(), "DOUBLE": pa.float64(), "FLOAT": pa.float32()}.get(druid, pa.string())
