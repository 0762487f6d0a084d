"""Staged dimension columns -> their stored form in one segment (`strata.storage.segment_layout`).

Each decision reads only the segment's own rows, as Druid decides per segment, so every engine
writes the same file however it grouped the rows before: a `string` column is a list column only
when a row of the segment holds two or more values, an `auto` column takes the type of the values
it holds, and a COMPLEX<json> column gets the typed columns of its paths.

`harmonized` lines up staged tables whose columns disagree in type (a block without lists beside
one with them, a real-time batch of LONGs beside one of STRINGs), losing nothing; `sort_keys`
gives list and JSON columns something Arrow can sort by.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from strata.ingestion.auto_types import infer_type, typed_values
from strata.ingestion.dimension_values import STRING_LIST, stage_json
from strata.ingestion.json_paths import path_columns
from strata.ingestion.scratch_duck import scratch_connection
from strata.ingestion.spec import DimensionSpec
from strata.storage.segment_layout import COMPLEX_JSON, JSON_TYPE, column_type, is_json


def _is_list(t: pa.DataType) -> bool:
    return bool(pa.types.is_list(t) or pa.types.is_large_list(t))


def staged_type(dim: DimensionSpec) -> pa.DataType:
    """The staged type of a dimension no row of a block has (its nulls)."""
    if dim.typed_by_values:
        return JSON_TYPE
    return {"long": pa.int64(), "float": pa.float32(), "double": pa.float64()}.get(dim.type, pa.string())


def wrapped(strings: pa.Array) -> pa.Array:
    """Strings as one-element lists (null stays null): `"a"` is `["a"]` to Druid."""
    strings = strings.cast(pa.string())
    offsets = np.arange(len(strings) + 1, dtype=np.int32)
    return pa.ListArray.from_arrays(pa.array(offsets), strings, mask=strings.is_null())


def _common(dim: DimensionSpec, types: set[pa.DataType]) -> pa.DataType | None:
    """The type every table's column becomes, or None for JSON text re-typed from the values."""
    if dim.type == "string":
        return STRING_LIST if any(_is_list(t) for t in types) else pa.string()
    if dim.typed_by_values:
        return None
    return types.pop()


def harmonized(tables: Sequence[pa.Table], dims: Sequence[DimensionSpec]) -> list[pa.Table]:
    """`tables` with each dimension of one type in all of them (missing columns added as nulls)."""
    out = list(tables)
    for dim in dims:
        types = {t.schema.field(dim.name).type for t in out if dim.name in t.column_names}
        if len(types) <= 1 and all(dim.name in t.column_names for t in out):
            continue
        target = _common(dim, set(types) or {staged_type(dim)})
        for i, t in enumerate(out):
            if dim.name not in t.column_names:
                nulls = pa.nulls(t.num_rows, staged_type(dim) if target is None else target)
                out[i] = t.append_column(dim.name, nulls)
                continue
            col = t.column(dim.name).combine_chunks()
            if target is None:
                col = stage_json(col)
            elif col.type != target:
                col = wrapped(col) if target == STRING_LIST else col.cast(target)
            out[i] = t.set_column(t.column_names.index(dim.name), dim.name, col)
    return out


def _multi_valued(col: pa.Array) -> bool:
    return bool(pc.any(pc.greater(pc.list_value_length(col), 1)).as_py())


def _single_values(col: pa.Array) -> pa.Array:
    """One-value lists as strings (a row holds at most one value)."""
    flat = pc.list_element(pc.fill_null(col, pa.scalar([None], STRING_LIST)), 0)
    return pc.if_else(col.is_null(), pa.scalar(None, pa.string()), flat)


def stored_columns(table: pa.Table, dims: Sequence[DimensionSpec]) -> tuple[pa.Table, list[dict[str, Any]]]:
    """One segment's rows with each dimension in its stored form, the typed path columns of its
    nested columns appended last, and the footer's dimension entries."""
    entries: list[dict[str, Any]] = []
    extra: list[tuple[str, pa.Array]] = []
    for dim in dims:
        entry: dict[str, Any] = {"name": dim.name, "type": dim.type}
        col = table.column(dim.name).combine_chunks()
        if dim.type == "string":
            entry["multiValueHandling"] = dim.multi_value_handling
            if _is_list(col.type):
                if _multi_valued(col):
                    entry["multiValue"] = True
                else:
                    col = _single_values(col)
        elif dim.typed_by_values:
            if dim.type == "json":
                kind = COMPLEX_JSON
                col = stage_json(col)
            elif is_json(col.type):
                kind = infer_type(col)
                col = typed_values(col, kind)
            else:
                kind = column_type(col.type)
            if kind == COMPLEX_JSON:
                paths = [
                    p for p in path_columns(col) if p.entry(dim.name)["column"] not in table.column_names
                ]
                entry["paths"] = [p.entry(dim.name) for p in paths]
                extra += [(p.entry(dim.name)["column"], p.values) for p in paths]
        entry["columnType"] = entry.get("columnType") or (
            "STRING" if dim.type == "string" else (kind if dim.typed_by_values else column_type(col.type))
        )
        table = table.set_column(table.column_names.index(dim.name), dim.name, col)
        entries.append(entry)
    for name, values in extra:
        table = table.append_column(name, values)
    return table, entries


def sort_keys(table: pa.Table, names: Sequence[str]) -> pa.Table:
    """`table` with each list or JSON column among `names` replaced by a sortable key: the JSON text,
    or a list's rank among the column's distinct lists (DuckDB orders lists element by element)."""
    for name in names:
        col = table.column(name)
        if is_json(col.type):
            key: pa.Array | pa.ChunkedArray = pa.chunked_array([c.storage for c in col.chunks], pa.string())
        elif _is_list(col.type):
            key = _list_ranks(col.combine_chunks())
        else:
            continue
        table = table.set_column(table.column_names.index(name), name, key)
    return table


def _list_ranks(col: pa.Array) -> pa.Array:
    with scratch_connection() as con:
        con.register("rows", pa.table({"v": col, "i": pa.array(np.arange(len(col), dtype=np.int64))}))
        ranked = con.sql(
            "SELECT dense_rank() OVER (ORDER BY v ASC NULLS FIRST) AS r FROM rows ORDER BY i"
        ).to_arrow_table()
    return ranked.column("r").combine_chunks().cast(pa.int64())
