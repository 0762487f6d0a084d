"""Druid's names for column types, as scan row signatures and segmentMetadata report them, and how a
column's Druid type travels with it in Arrow partials.

DuckDB hands back a multi-value STRING as a list of strings and a COMPLEX<json> value as plain
text, the same Arrow types an ARRAY<STRING> and a STRING have; such columns carry their Druid type
in their Arrow field's metadata (`DRUID_TYPE`), which Arrow keeps through IPC, slicing and
concatenation, so the broker shapes them as Druid does (`json_value`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson
import pyarrow as pa

from strata.query.duck import MULTI_VALUE

DRUID_TYPE = b"druid.type"
MULTI_VALUE_STRING = "MULTI_VALUE_STRING"  # field metadata only: reported as STRING
COMPLEX_JSON = "COMPLEX<json>"
_FROM_DUCK = {
    "BIGINT": "LONG",
    "INTEGER": "LONG",
    "BOOLEAN": "LONG",
    "FLOAT": "FLOAT",
    "DOUBLE": "DOUBLE",
    "VARCHAR": "STRING",
    "JSON": COMPLEX_JSON,
    "BLOB": "COMPLEX<HLLSketch>",
}


def druid_type(t: pa.DataType) -> str:
    """Druid's type of a column from its Arrow type alone (a segment's footer can say more: a list
    of strings there may be a multi-value STRING, see `strata.storage.segment_layout`)."""
    if pa.types.is_dictionary(t):
        return druid_type(t.value_type)
    if isinstance(t, pa.JsonType):
        return COMPLEX_JSON
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        element = druid_type(t.value_type)
        return f"ARRAY<{'DOUBLE' if element == 'FLOAT' else element}>"
    if pa.types.is_timestamp(t) or pa.types.is_integer(t):
        return "LONG"
    if pa.types.is_float32(t):
        return "FLOAT"
    if pa.types.is_floating(t):
        return "DOUBLE"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return "COMPLEX<HLLSketch>"  # the only complex metric segments hold
    return "STRING"


def duck_druid_type(duck: str) -> str:
    """Druid's type of a value of DuckDB type `duck` (`MULTI_VALUE` is a multi-value STRING)."""
    if duck == MULTI_VALUE:
        return MULTI_VALUE_STRING
    if duck.endswith("[]"):
        element = duck_druid_type(duck[:-2])
        return f"ARRAY<{'DOUBLE' if element == 'FLOAT' else element}>"
    return _FROM_DUCK.get(duck.split("(")[0].upper(), "STRING")


def field_druid_type(field: pa.Field) -> str:
    """A partial's column type: its metadata's when it has some, else its Arrow type's."""
    meta = field.metadata or {}
    marked = meta.get(DRUID_TYPE)
    return marked.decode() if marked else druid_type(field.type)


def reported(kind: str) -> str:
    """The type Druid reports (row signatures, segmentMetadata): a multi-value STRING is STRING."""
    return "STRING" if kind == MULTI_VALUE_STRING else kind


def mark_types(table: pa.Table, duck_types: Mapping[str, str]) -> pa.Table:
    """`table` with the columns whose Arrow type does not say their Druid type marked (multi-value
    strings, JSON text); other columns are left as they are."""
    fields = []
    changed = False
    for f in table.schema:
        kind = duck_types.get(f.name)
        marked = None if kind is None else duck_druid_type(kind)
        if marked in (MULTI_VALUE_STRING, COMPLEX_JSON) and field_druid_type(f) != marked:
            f = f.with_metadata({**(f.metadata or {}), DRUID_TYPE: marked.encode()})
            changed = True
        fields.append(f)
    return table.cast(pa.schema(fields, table.schema.metadata)) if changed else table


def json_value(kind: str, value: Any) -> Any:
    """A value as Druid's JSON answers print it: a multi-value STRING's one value as a string (and
    no values as null), a COMPLEX<json> value as the JSON it holds."""
    if value is None:
        return None
    if kind == MULTI_VALUE_STRING and isinstance(value, list):
        if not value:
            return None
        return value[0] if len(value) == 1 else value
    if kind == COMPLEX_JSON and isinstance(value, str):
        return orjson.loads(value)
    return value


def arrow_type(druid: str) -> pa.DataType:
    """The Arrow type a column of Druid type `druid` travels as (typed scans, the Spark reader)."""
    kind = druid.upper()
    if kind == "LONG":
        return pa.int64()
    if kind == "FLOAT":
        return pa.float32()
    if kind == "DOUBLE":
        return pa.float64()
    if kind.startswith("ARRAY<") and kind.endswith(">"):
        return pa.list_(arrow_type(kind[6:-1]))
    if kind.startswith("COMPLEX<JSON"):
        return pa.string()
    if kind.startswith("COMPLEX"):
        return pa.binary()
    return pa.string()
