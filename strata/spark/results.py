"""Spark schemas for what the broker returns, and its answers as Arrow batches in exactly those types.

Spark checks the first batch a Python data source yields against its schema (names, order and
Arrow types), so every answer goes through here: scans are cast column by column (the broker
streams `__time` as `timestamp[ms, UTC]`; Spark wants microseconds, the same instant), SQL and
native JSON answers are built into columns from their rows.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.pandas.types import from_arrow_type, to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DataType,
    DateType,
    DoubleType,
    FloatType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from strata.spark.broker_client import SqlResult, StrataError

TIME_COLUMN = "__time"
NATIVE_TIME = "timestamp"  # the bucket time of timeseries, topN and groupBy rows

_SQL_TYPES: dict[str, DataType] = {
    "TIMESTAMP": TimestampType(),
    "DATE": DateType(),
    "BIGINT": LongType(),
    "INTEGER": LongType(),
    "SMALLINT": LongType(),
    "TINYINT": LongType(),
    "DOUBLE": DoubleType(),
    "DECIMAL": DoubleType(),
    "FLOAT": FloatType(),
    "REAL": FloatType(),
    "BOOLEAN": BooleanType(),
    "VARCHAR": StringType(),
    "CHAR": StringType(),
}


_ELEMENTS: dict[str, DataType] = {"ARRAY<LONG>": LongType(), "ARRAY<DOUBLE>": DoubleType(),
                                   "ARRAY<STRING>": StringType()}  # fmt: skip


def spark_type(druid_type: str) -> DataType:
    """The Spark type of a Druid column: ARRAY<...> an ArrayType (a multi-value STRING is read as
    ARRAY<STRING>), COMPLEX<json> its JSON text as a string (a nested column has no one struct
    type: a path may hold a number in one row and text in the next), others by `arrow_type`."""
    from strata.query.druid_types import arrow_type  # here: tasks and the planner need none of strata.query

    kind = druid_type.upper()
    if kind in _ELEMENTS:
        return ArrayType(_ELEMENTS[kind], True)
    if kind in ("JSON", "COMPLEX<JSON>"):
        return StringType()
    return from_arrow_type(arrow_type(druid_type))


def table_schema(column_types: Mapping[str, str], columns: Sequence[str] = ()) -> StructType:
    """The datasource's columns (or the `columns` asked, in that order), `__time` a timestamp."""
    names = list(columns) or list(column_types)
    unknown = [c for c in names if c not in column_types]
    if unknown:
        known = ", ".join(column_types)
        raise StrataError(f"unknown column(s) {', '.join(unknown)}; the datasource has {known}")
    # Druid's `__time` is never null: declared so, Spark reads it without a null check per row
    return StructType(
        [
            StructField(n, TimestampType(), False)
            if n == TIME_COLUMN
            else StructField(n, spark_type(column_types[n]))
            for n in names
        ]
    )


def sql_schema(result: SqlResult) -> StructType:
    fields = []
    for name, druid, sql in zip(result.names, result.types, result.sql_types, strict=True):
        kind = _SQL_TYPES.get(str(sql).upper().split("(")[0]) or spark_type(str(druid or "STRING"))
        fields.append(StructField(name, kind, True))
    return StructType(fields)


def native_rows(query: Mapping[str, Any], results: Sequence[Any]) -> tuple[list[str], list[dict[str, Any]]]:
    """A native answer flattened to rows: one per timeseries bucket, topN entry, groupBy row, scan event."""
    kind = query.get("queryType")
    rows: list[dict[str, Any]] = []
    for item in results:
        if kind in ("timeseries", "timeBoundary"):
            rows.append({NATIVE_TIME: item.get("timestamp"), **(item.get("result") or {})})
        elif kind == "topN":
            rows += [{NATIVE_TIME: item.get("timestamp"), **entry} for entry in item.get("result") or []]
        elif kind == "groupBy":
            if not isinstance(item, Mapping):
                raise StrataError("groupBy with resultAsArray is not supported by the query option")
            rows.append({NATIVE_TIME: item.get("timestamp"), **(item.get("event") or {})})
        elif kind == "scan":
            columns = item.get("columns") or []
            for event in item.get("events") or []:
                rows.append(
                    dict(event) if isinstance(event, Mapping) else dict(zip(columns, event, strict=False))
                )
        else:
            raise StrataError(
                f"queryType [{kind}] is not supported by the query option (timeseries, topN, groupBy, scan)"
            )
    names = list(dict.fromkeys(k for row in rows for k in row))
    return names, rows


def infer_schema(names: Sequence[str], rows: Sequence[Mapping[str, Any]]) -> StructType:
    """Spark types from JSON values: integers long, any float double, `timestamp`/`__time` timestamps."""
    fields = []
    for name in names:
        seen = {type(r.get(name)) for r in rows} - {type(None)}
        if name in (NATIVE_TIME, TIME_COLUMN):
            kind: DataType = TimestampType()
        elif seen == {bool}:
            kind = BooleanType()
        elif seen and seen <= {int}:
            kind = LongType()
        elif seen and seen <= {int, float}:
            kind = DoubleType()
        else:
            kind = StringType()
        fields.append(StructField(name, kind, True))
    return StructType(fields)


def rows_batch(schema: StructType, names: Sequence[str], rows: Sequence[Any]) -> pa.RecordBatch:
    """Rows (dicts by name, or lists in `names` order) as one batch in Spark's Arrow schema."""
    target = to_arrow_schema(schema, timezone="UTC")
    position = {n: i for i, n in enumerate(names)}
    arrays = []
    for f, spark_field in zip(target, schema.fields, strict=True):
        i = position.get(f.name)
        values = [_cell(r, f.name, i) for r in rows]
        arrays.append(pa.array([_convert(v, spark_field.dataType) for v in values], type=f.type))
    return pa.RecordBatch.from_arrays(arrays, schema=target)


def conform_batch(batch: pa.RecordBatch, target: pa.Schema) -> pa.RecordBatch:
    """A scan batch (the broker's stream or a data node's partials) in Spark's exact Arrow schema
    (by name; a missing column is null; `__time` as epoch milliseconds becomes a timestamp)."""
    arrays = []
    for f in target:
        index = batch.schema.get_field_index(f.name)
        if index < 0:
            _check_nullable(f, batch.num_rows)
            arrays.append(pa.nulls(batch.num_rows, f.type))
            continue
        column = batch.column(index)
        if isinstance(column, pa.ExtensionArray):  # COMPLEX<json>: its JSON text
            column = column.storage
        if pa.types.is_integer(column.type) and pa.types.is_timestamp(f.type):
            column = column.cast(pa.int64()).cast(pa.timestamp("ms", tz="UTC"))
        if pa.types.is_list(f.type) and not pa.types.is_list(column.type):  # a single-value segment
            offsets = pa.array(range(len(column) + 1), pa.int32())
            column = pa.ListArray.from_arrays(offsets, column, mask=column.is_null())
        _check_nullable(f, column.null_count)
        arrays.append(column if column.type == f.type else column.cast(f.type))
    return pa.RecordBatch.from_arrays(arrays, schema=target)


def _check_nullable(target: pa.Field, nulls: int) -> None:
    """Spark reads a NOT NULL column without looking at its validity: a null would be a value."""
    if nulls and not target.nullable:
        raise StrataError(f"column {target.name} has {nulls} null value(s) but is declared NOT NULL")


def _cell(row: Any, name: str, index: int | None) -> Any:
    if isinstance(row, Mapping):
        return row.get(name)
    return None if index is None or index >= len(row) else row[index]


def _convert(value: Any, kind: DataType) -> Any:
    if value is None:
        return None
    if isinstance(kind, TimestampType):
        return _timestamp(value)
    if isinstance(kind, DateType):
        return _timestamp(value).date()
    if isinstance(kind, StringType) and not isinstance(value, str):
        return json.dumps(value) if isinstance(value, (dict, list)) else str(value)
    if isinstance(kind, (DoubleType, FloatType)):
        return float(value)  # Druid prints NaN and infinities as strings
    return value


def _timestamp(value: Any) -> dt.datetime:
    """Druid's times: ISO-8601 text (SQL, native buckets) or epoch milliseconds (scan `__time`)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(milliseconds=int(value))
    text = str(value)
    parsed = dt.datetime.fromisoformat(text.replace("Z", "+00:00") if text.endswith("Z") else text)
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=dt.UTC)
