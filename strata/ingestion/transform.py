"""Druid's `transformSpec`: expression transforms, then a filter, over each block of input rows.

Expressions are Druid's native expression language (`strata.query.expressions`), filters Druid's
native filters (`strata.query.filters`), both compiled to one DuckDB query over the block: rows
as read (after any flattenSpec) plus `__time`, the parsed timestamp in epoch milliseconds. A
transform that is `json_value(field, 'path'[, 'type'])` or `json_query(field, 'path')` of an input
field (nested input, arrays) reads the field's values as JSON, value by value, so the output keeps
each value's own type for the `auto` dimension it feeds (`1`, `1.5`, `"a"`, `[1, 2]`). As in
Druid, a transform reads only input fields (never another transform's output), shadows an input
field of its name (the dimensions and metrics then read the transform), may set `__time`, and the
filter reads the transformed row; rows it rejects are thrown away. Transform outputs are not
discovered as dimensions by schemaless ingestion.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from strata.ingestion.dimension_values import java_string, json_column, values_column
from strata.ingestion.errors import SpecError
from strata.ingestion.flatten import Step, parse_path, python_values, walk
from strata.ingestion.scratch_duck import scratch_connection

if TYPE_CHECKING:  # the query language is imported only by specs that transform (~0.5 s of imports)
    from strata.query.expressions.parser import Node
    from strata.query.filters import Filter

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
    if not obj.get("transforms") and not obj.get("filter"):
        return None
    from strata.query.errors import QueryError
    from strata.query.expressions.parser import parse_expression
    from strata.query.filters import parse_filter

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


_CASTS = {"LONG": int, "DOUBLE": float, "STRING": str}


@dataclass(frozen=True)
class JsonPathCall:
    function: str  # json_value or json_query
    field: str
    steps: tuple[Step, ...]
    cast: str | None = None  # json_value's optional type: LONG, DOUBLE, STRING, ARRAY<...>

    def apply(self, value: Any) -> Any:
        found = walk(value, self.steps) if self.steps else value
        if self.function == "json_query":
            return found
        if isinstance(found, dict) or (
            isinstance(found, list) and any(isinstance(e, (list, dict)) for e in found)
        ):
            return None  # json_value gives only literals and arrays of them
        if isinstance(found, bool) and self.cast is None:
            return java_string(found)  # Druid's reader hands a JSON boolean on as its text
        if self.cast is None or found is None:
            return found
        if self.cast.startswith("ARRAY<"):
            convert = _CASTS.get(self.cast[len("ARRAY<") : -1], str)
            items = found if isinstance(found, list) else [found]
            return [None if e is None else _cast(convert, e) for e in items]
        return None if isinstance(found, list) else _cast(_CASTS.get(self.cast, str), found)


def _cast(convert: Any, value: Any) -> Any:
    try:
        return java_string(value) if convert is str else convert(value)
    except (TypeError, ValueError):
        return None


def json_path_call(node: Node) -> JsonPathCall | None:
    """`node` as a JSON path read of an input field, when it is one."""
    from strata.query.expressions.parser import Call, Identifier, Literal

    if not isinstance(node, Call) or node.name not in ("json_value", "json_query"):
        return None
    args = node.args
    if not (2 <= len(args) <= (3 if node.name == "json_value" else 2)) or not isinstance(args[0], Identifier):
        return None
    if not all(isinstance(a, Literal) and isinstance(a.value, str) for a in args[1:]):
        return None
    path = str(args[1].value)  # type: ignore[union-attr]
    try:
        steps = parse_path(path if path.startswith("$") else "$" + path)
    except SpecError:
        return None
    cast = str(args[2].value).upper() if len(args) == 3 else None  # type: ignore[union-attr]
    return JsonPathCall(node.name, args[0].name, steps, cast)


@dataclass
class Transformed:
    table: pa.Table  # the input fields, transform outputs in place of the fields they shadow
    times: np.ndarray  # epoch ms, `__time` transforms applied
    keep: np.ndarray | None  # rows the filter passes (None: all)


def _registered(table: pa.Table, times: np.ndarray) -> tuple[pa.Table, dict[str, str]]:
    from strata.query.duck import duck_type

    columns = {n: table.column(n) for n in table.column_names if n != TIME}
    rows = pa.table({**columns, TIME: pa.array(times, pa.int64())})
    return rows, {f.name: duck_type(f.type) for f in rows.schema}


def apply_transforms(table: pa.Table, times: np.ndarray, spec: TransformSpec) -> Transformed:
    """`spec` over one block's rows (`times`: each row's parsed timestamp, epoch ms)."""
    from strata.query.duck import quote_ident
    from strata.query.errors import QueryError
    from strata.query.expressions.duck import compile_expression

    rows, types = _registered(table, times)
    with scratch_connection() as con:
        con.register("input_rows", rows)
        by_path = {t.name: c for t in spec.transforms if (c := json_path_call(t.tree)) is not None}
        try:
            compiled = {
                t.name: compile_expression(t.tree, types) for t in spec.transforms if t.name not in by_path
            }
        except QueryError as e:
            raise SpecError(f"transformSpec: {e}") from None
        select = [f"{c.sql} AS {quote_ident(name)}" for name, c in compiled.items()]
        outputs = con.sql(f"SELECT {', '.join(select) or '1 AS __none'} FROM input_rows").to_arrow_table()
        results = {name: outputs.column(name) for name in compiled}
        fields: dict[str, list[Any]] = {}
        for name, call in by_path.items():
            if call.field not in fields:
                present = call.field in rows.column_names
                fields[call.field] = (
                    python_values(rows.column(call.field)) if present else [None] * rows.num_rows
                )
            found = [call.apply(v) for v in fields[call.field]]
            results[name] = json_column(found) if call.function == "json_query" else values_column(found)
        out = table
        for t in spec.transforms:
            column = results[t.name]
            if t.name in out.column_names:
                out = out.set_column(out.column_names.index(t.name), t.name, column)
            else:
                out = out.append_column(t.name, column)
        if TIME in results:
            times = _transformed_times(results[TIME], times)
        keep = None
        if spec.filter is not None:
            rows, types = _registered(out, times)
            con.register("transformed_rows", rows)
            where = spec.filter.to_sql(types)
            passed = con.sql(
                f"SELECT COALESCE({where}, false) AS keep FROM transformed_rows"
            ).to_arrow_table()
            keep = passed.column("keep").to_numpy(zero_copy_only=False).astype(bool)
    return Transformed(out, times, keep)


def _transformed_times(column: pa.Array | pa.ChunkedArray, times: np.ndarray) -> np.ndarray:
    """A `__time` transform's output as epoch ms; a null keeps the row's parsed time."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    values = column.cast(pa.int64())
    nulls = values.is_null().to_numpy(zero_copy_only=False)
    filled = values.fill_null(0).to_numpy(zero_copy_only=False)
    return np.where(nulls, times, filled).astype(np.int64)
