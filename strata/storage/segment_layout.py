"""How a segment file stores Druid's column types, and how it says which type each column has.

Physical layout (docs/ingestion.md, "How a segment stores multi-value strings, arrays and nested
values", says why):

- STRING: a Parquet string (dictionary-encoded). A *multi-value* STRING is a list of strings in a
  segment where some row holds two or more values, and a plain string in a segment where none
  does (Druid stores `["a"]` as `"a"`); a row with no value (`null`, `[]`, `[null]`) is null.
- LONG / FLOAT / DOUBLE: int64 / float32 / float64.
- ARRAY<LONG> / ARRAY<DOUBLE> / ARRAY<STRING>: a list of int64 / float64 / string; `null`, `[]` and
  `[null]` stay three different values.
- COMPLEX<json>: the value as JSON text in Arrow's `arrow.json` extension type (Parquet's JSON
  logical type, which DuckDB reads as JSON), plus one typed column per literal leaf path of the
  values in that segment (`"<column>.<path>"`, e.g. `"attrs.$.user.id"`), as Druid's nested columns
  keep their fields: a scalar path is LONG, DOUBLE or STRING, a path holding arrays of literals an
  ARRAY<...>; a row without the path is null there.

The footer's `strata` facts list each dimension as
`{"name", "type", "columnType", ["multiValue"], ["multiValueHandling"], ["paths"]}`: `type` is the
spec's dimension type (string, long, float, double, auto, json), `columnType` Druid's type of the
column in this segment, `multiValue` whether a STRING column is stored as lists here, and `paths`
(COMPLEX<json> only) `[{"path": "$.a.b", "column": "c.$.a.b", "type": "LONG"}, ...]`. Path columns
are not columns of the data source: readers hide them (`hidden_columns`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pyarrow as pa

JSON_TYPE = pa.json_(pa.string())
"""COMPLEX<json> values: JSON text, typed so Parquet and DuckDB know it is JSON."""

STRING, LONG, FLOAT, DOUBLE = "STRING", "LONG", "FLOAT", "DOUBLE"
ARRAY_STRING, ARRAY_LONG, ARRAY_DOUBLE = "ARRAY<STRING>", "ARRAY<LONG>", "ARRAY<DOUBLE>"
COMPLEX_JSON = "COMPLEX<json>"

_SCALARS: dict[str, pa.DataType] = {
    STRING: pa.string(),
    LONG: pa.int64(),
    FLOAT: pa.float32(),
    DOUBLE: pa.float64(),
}
_ELEMENTS: dict[str, pa.DataType] = {
    ARRAY_STRING: pa.string(),
    ARRAY_LONG: pa.int64(),
    ARRAY_DOUBLE: pa.float64(),
}


def is_json(t: pa.DataType) -> bool:
    return isinstance(t, pa.JsonType)


def arrow_type(column_type: str, multi_value: bool = False) -> pa.DataType:
    """The Arrow type a column of Druid type `column_type` is stored as."""
    if column_type == COMPLEX_JSON:
        return JSON_TYPE
    if column_type in _ELEMENTS:
        return pa.list_(_ELEMENTS[column_type])
    if column_type == STRING and multi_value:
        return pa.list_(pa.string())
    try:
        return _SCALARS[column_type]
    except KeyError:
        raise ValueError(f"no stored layout for column type {column_type!r}") from None


def column_type(t: pa.DataType) -> str:
    """Druid's type of a stored column from its Arrow type alone (a list of strings reads as
    ARRAY<STRING>: only the footer can say it is a multi-value STRING)."""
    if pa.types.is_dictionary(t):
        return column_type(t.value_type)
    if is_json(t):
        return COMPLEX_JSON
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        element = column_type(t.value_type)
        return f"ARRAY<{DOUBLE if element == FLOAT else element}>"
    if pa.types.is_timestamp(t) or pa.types.is_integer(t) or pa.types.is_boolean(t):
        return LONG
    if pa.types.is_float32(t):
        return FLOAT
    if pa.types.is_floating(t):
        return DOUBLE
    return STRING


def path_column(column: str, path: str) -> str:
    """The stored name of the typed column of `path` (a JSONPath such as `$.a[0]`) in `column`."""
    return f"{column}.{path}"


def dimension_entries(facts: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The footer's dimension entries, each a dict (older footers list bare names)."""
    return [d if isinstance(d, dict) else {"name": d, "type": "string"} for d in facts.get("dimensions", [])]


def hidden_columns(facts: Mapping[str, Any]) -> set[str]:
    """Stored columns that are not the data source's: the typed path columns of nested values."""
    return {p["column"] for d in dimension_entries(facts) for p in d.get("paths") or ()}


def column_types(facts: Mapping[str, Any], schema: Iterable[pa.Field]) -> dict[str, str]:
    """Druid's type of each visible stored column: the footer's `columnType`, else from the Arrow type."""
    declared = {d["name"]: d.get("columnType") for d in dimension_entries(facts)}
    hidden = hidden_columns(facts)
    return {f.name: declared.get(f.name) or column_type(f.type) for f in schema if f.name not in hidden}


def multi_value_columns(facts: Mapping[str, Any]) -> set[str]:
    """STRING dimensions stored as lists in this segment."""
    return {d["name"] for d in dimension_entries(facts) if d.get("multiValue")}
