"""A query over the rows of another query (Druid's `query` dataSource), evaluated where the inner
answer is: on the broker, as Druid's broker does.

The inner answer's rows (groupBy events, timeseries and topN results, scan events) become a table
with `__time` and one column per field, written as one temporary segment file; the outer query
then runs on it with the same engine data nodes use, so its semantics are the native ones.
"""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from strata.engine.engine import run_to_json
from strata.engine.segment_input import SegmentInput
from strata.engine.wrapped_source import inline_table
from strata.query.base import Query
from strata.query.columns import TIME_COLUMN
from strata.query.data_source import INLINE_TYPES, InlineSource
from strata.query.druid_types import druid_type
from strata.query.duck import engine_limits
from strata.query.errors import QueryUnsupported
from timeline import Interval, SegmentDescriptor, parse_instant

_DUCK_MIN_MS = -9_223_372_036_854  # DuckDB keeps microseconds in a signed 64-bit integer
_DUCK_MAX_MS = 9_223_372_036_854


def _records(inner: Query, results: Sequence[Any]) -> tuple[list[int], list[Mapping[str, Any]]]:
    times: list[int] = []
    records: list[Mapping[str, Any]] = []
    kind = inner.query_type

    def stamp(row: Mapping[str, Any]) -> int:
        value = row.get("timestamp")
        return value if isinstance(value, int) else parse_instant(str(value)) if value else 0

    for row in results:
        if not isinstance(row, Mapping):
            raise QueryUnsupported("A subquery answering arrays (resultAsArray) is not supported")
        if kind == "groupBy":
            times.append(stamp(row))
            records.append(row["event"])
        elif kind == "timeseries":
            times.append(stamp(row))
            records.append(row["result"])
        elif kind == "topN":
            for entry in row["result"]:
                times.append(stamp(row))
                records.append(entry)
        elif kind == "scan":
            names = row.get("columns") or []
            for event in row.get("events", []):
                record = dict(zip(names, event, strict=False)) if isinstance(event, list) else event
                value = record.get(TIME_COLUMN, 0)
                times.append(value if isinstance(value, int) else parse_instant(str(value)))
                records.append(record)
        else:
            raise QueryUnsupported(f"A [{kind}] subquery is not supported in a query dataSource")
    return times, records


def rows_table(inner: Query, results: Sequence[Any]) -> pa.Table:
    """The inner answer as rows: `__time` (the row's timestamp) and each field as a column."""
    times, records = _records(inner, results)
    names = list(dict.fromkeys(k for r in records for k in r if k != TIME_COLUMN))
    # DuckDB's timestamps end near year ±290,000: an inner answer stamped with the eternity
    # interval's start (year -146,136,543) is moved to the earliest one DuckDB reads
    clamped = [min(max(t, _DUCK_MIN_MS), _DUCK_MAX_MS) for t in times]
    columns: dict[str, pa.Array] = {
        TIME_COLUMN: pa.array(clamped, pa.int64()).cast(pa.timestamp("ms", tz="UTC"))
    }
    for name in names:
        values = [r.get(name) for r in records]
        try:
            columns[name] = pa.array(values)
        except (pa.ArrowInvalid, pa.ArrowTypeError):  # mixed kinds: compare as text, as Druid would
            columns[name] = pa.array([None if v is None else str(v) for v in values], pa.string())
        if pa.types.is_null(columns[name].type):
            columns[name] = columns[name].cast(pa.string())
    return pa.table(columns).sort_by(TIME_COLUMN)


def answer_over_rows(outer: Query, inner_results: Sequence[Any]) -> list[Any]:
    """The outer query's Druid answer over the inner query's rows (blocking: run off the loop)."""
    assert outer.inner is not None
    return answer_over_table(dataclasses.replace(outer, inner=None), rows_table(outer.inner, inner_results))


def inline_of(inner: Query, results: Sequence[Any]) -> InlineSource:
    """A query's answer as inline rows (a join's right side, sent on to the data nodes)."""
    table = rows_table(inner, results)
    columns = [c for c in table.column_names if c != TIME_COLUMN]
    kinds = [druid_type(table.schema.field(c).type) for c in columns]
    types = tuple(k if k in INLINE_TYPES else None for k in kinds)
    values = [table.column(c).to_pylist() for c in columns]
    return InlineSource(tuple(columns), types, tuple(zip(*values, strict=True)) if values else ())


def answer_over_inline(query: Query, inline: InlineSource) -> list[Any]:
    """A query's answer over inline rows (its dataSource's leaf): `__time` from a column of that
    name, else 0, as Druid reads an inline datasource."""
    table = inline_table(inline)
    if TIME_COLUMN in table.column_names:
        times = table.column(TIME_COLUMN).cast(pa.int64())
        table = table.drop_columns([TIME_COLUMN])
    else:
        times = pa.array([0] * table.num_rows, pa.int64())
    table = table.add_column(0, TIME_COLUMN, pa.chunked_array([times]).cast(pa.timestamp("ms", tz="UTC")))
    return answer_over_table(query, table.sort_by(TIME_COLUMN))


def answer_over_table(plain: Query, table: pa.Table) -> list[Any]:
    """`plain`'s answer over `table` (`__time` and the columns), written as one temporary segment."""
    # the engine's own scratch directory: the only one a broker's engine may read
    with tempfile.TemporaryDirectory(prefix="strata-subquery-", dir=engine_limits().scratch_dir) as tmp:
        path = Path(tmp) / "index.parquet"
        pq.write_table(table, path)
        inputs: list[SegmentInput] = []
        if table.num_rows:
            times = table.column(TIME_COLUMN).cast(pa.int64())
            span = Interval(pc.min(times).as_py(), pc.max(times).as_py() + 1)  # the segment's own interval
            descriptor = SegmentDescriptor(span, "subquery", 0)
            for wanted in plain.segment_spec.intervals:
                part = wanted.overlap(span)
                if part is not None:
                    inputs.append(SegmentInput("subquery", descriptor, str(path), part))
        return run_to_json(plain, inputs)
