"""Druid's `transformSpec`: expression transforms, then a filter, over each block of input rows.

Expressions are Druid's native expression language (`strata.query.expressions`), filters Druid's
native filters (`strata.query.filters`), both compiled to one DuckDB query over the block: rows
as read (after any flattenSpec) plus `__time`, the parsed timestamp in epoch milliseconds. As in
Druid, a transform reads only input fields (never another transform's output), shadows an input
field of its name (the dimensions and metrics then read the transform), may set `__time`, and the
filter reads the transformed row; rows it rejects are thrown away. Transform outputs are not
discovered as dimensions by schemaless ingestion.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa

from strata.ingestion.errors import SpecError
from strata.query.duck import duck_type, quote_ident
from strata.query.errors import QueryError
from strata.query.expressions.duck import compile_expression
from strata.query.expressions.parser import Node, parse_expression
from strata.query.filters import Filter, parse_filter

TIME = "__time"


@dataclass(frozen=True)
class Transform:
    name: str
    expression: str
    tree: Node


@dataclass(frozen=True)
class TransformSpec:
    transforms: tuple[Transform, ...] = ()
    filter: Filter | None = None


def parse_transform_spec(obj: Mapping[str, Any]) -> TransformSpec | None:
    """`dataSchema.transformSpec` (None when it transforms and filters nothing)."""
    transforms = []
    for t in obj.get("transforms") or ():
        if not isinstance(t, Mapping) or not isinstance(t.get("name"), str):
            raise SpecError(f"transformSpec.transforms entries need a 'name': {t!r}")
        if t.get("type", "expression") != "expression":
            raise SpecError(f"transform {t['name']!r}: type {t.get('type')!r} is not supported (expression)")
        text = t.get("expression")
        if not isinstance(text, str):
            raise SpecError(f"transform {t['name']!r} needs an 'expression'")
        try:
            transforms.append(Transform(t["name"], text, parse_expression(text)))
        except QueryError as e:
            raise SpecError(f"transform {t['name']!r}: {e}") from None
    names = [t.name for t in transforms]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise SpecError(f"transformSpec names transforms more than once: {', '.join(dupes)}")
    try:
        flt = parse_filter(obj.get("filter")) if obj.get("filter") else None
    except QueryError as e:
        raise SpecError(f"transformSpec.filter: {e}") from None
    if not transforms and flt is None:
        return None
    return TransformSpec(tuple(transforms), flt)


@dataclass
class Transformed:
    table: pa.Table  # the input fields, transform outputs in place of the fields they shadow
    times: np.ndarray  # epoch ms, `__time` transforms applied
    keep: np.ndarray | None  # rows the filter passes (None: all)


def _registered(table: pa.Table, times: np.ndarray) -> tuple[pa.Table, dict[str, str]]:
    columns = {n: table.column(n) for n in table.column_names if n != TIME}
    rows = pa.table({**columns, TIME: pa.array(times, pa.int64())})
    return rows, {f.name: duck_type(f.type) for f in rows.schema}


def apply_transforms(table: pa.Table, times: np.ndarray, spec: TransformSpec) -> Transformed:
    """`spec` over one block's rows (`times`: each row's parsed timestamp, epoch ms)."""
    rows, types = _registered(table, times)
    con = duckdb.connect()
    try:
        con.execute("SET enable_progress_bar = false")
        con.register("input_rows", rows)
        try:
            compiled = {t.name: compile_expression(t.tree, types) for t in spec.transforms}
        except QueryError as e:
            raise SpecError(f"transformSpec: {e}") from None
        select = [f"{c.sql} AS {quote_ident(name)}" for name, c in compiled.items()]
        outputs = con.sql(f"SELECT {', '.join(select) or '1 AS __none'} FROM input_rows").to_arrow_table()
        out = table
        for name in compiled:
            column = outputs.column(name)
            if name in out.column_names:
                out = out.set_column(out.column_names.index(name), name, column)
            else:
                out = out.append_column(name, column)
        if TIME in compiled:
            times = _transformed_times(outputs.column(TIME), times)
        keep = None
        if spec.filter is not None:
            rows, types = _registered(out, times)
            con.register("transformed_rows", rows)
            where = spec.filter.to_sql(types)
            passed = con.sql(
                f"SELECT COALESCE({where}, false) AS keep FROM transformed_rows"
            ).to_arrow_table()
            keep = passed.column("keep").to_numpy(zero_copy_only=False).astype(bool)
    finally:
        con.close()
    return Transformed(out, times, keep)


def _transformed_times(column: pa.ChunkedArray, times: np.ndarray) -> np.ndarray:
    """A `__time` transform's output as epoch ms; a null keeps the row's parsed time."""
    values = column.combine_chunks().cast(pa.int64())
    nulls = values.is_null().to_numpy(zero_copy_only=False)
    filled = values.fill_null(0).to_numpy(zero_copy_only=False)
    return np.where(nulls, times, filled).astype(np.int64)
