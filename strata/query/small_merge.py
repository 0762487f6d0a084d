"""Merging many small partials as Python values, bit for bit what the Arrow merge gives.

A warm broker answering from its per-segment cache merges a hundred one-row partials per query.
Arrow pays per table and per chunk there (concatenating 100 tiny tables, ~0.3 ms, is most of the
merge), while the rows themselves are few. Each partial's rows are read into Python once and
remembered for as long as the table lives (a cached partial is the same table object on every
hit), so a repeat costs a list concatenation.

Only the two shapes whose Arrow result is known exactly: no grouping keys (granularity all, no
dimensions: one row, each value from Arrow's own scalar kernel over the concatenated values), and
one row per distinct bucket with the bucket the only key (hourly segments under hour
granularity: Arrow's merge passes the rows through). Arrow's group_by orders other groups its
own way (not always by first appearance), so those, NaN (merged by DuckDB), mixed schemas and
intermediates other than int64/double sum/min/max return None: the caller merges in Arrow or
DuckDB as before.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

PYTHON_MERGE_MAX_ROWS = 4_096  # beyond this Arrow's per-row speed wins over its per-table cost
# Beyond this many partials, reading each new one into Python costs more than Arrow's concatenation
# and group_by (one-row partials, measured in process: 256 fresh ones 6.3 ms against 4.5 ms; 5,000
# fresh ones 193 ms against 49 ms; remembered ones 0.1 and 4 ms). A warm broker's hundred cached
# partials stay well below it; a cold read of thousands of segments goes to Arrow.
PYTHON_MERGE_MAX_TABLES = 256
_FUNCTIONS = frozenset({"sum", "min", "max"})
_AGG_TYPES = frozenset({"int64", "double"})


@dataclass(frozen=True, slots=True)
class _Form:
    """A table's (name, type) pairs, one shared tuple per distinct schema (None when a double
    column holds NaN: DuckDB merges those), and its rows."""

    shape: tuple[tuple[str, str], ...] | None
    rows: list[tuple[Any, ...]]


_forms: dict[int, tuple[weakref.ref[pa.Table], _Form]] = {}
_shapes: dict[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]] = {}
_lock = threading.Lock()


def _form(table: pa.Table) -> _Form | None:
    """The table's Python form, remembered while the table lives (keyed by identity); None for
    a table too large to be worth it."""
    key = id(table)
    entry = _forms.get(key)
    if entry is not None and entry[0]() is table:
        return entry[1]
    if table.num_rows > PYTHON_MERGE_MAX_ROWS:
        return None
    fields = tuple((f.name, str(f.type)) for f in table.schema)
    columns = [column.to_pylist() for column in table.columns]
    nan = any(t == "double" and any(v != v for v in c) for (_, t), c in zip(fields, columns, strict=True))
    shape = None if nan else fields  # NaN: not equal to itself
    rows = list(zip(*columns, strict=True))

    def forget(ref: weakref.ref[pa.Table], key: int = key) -> None:
        with _lock:
            current = _forms.get(key)
            if current is not None and current[0] is ref:
                del _forms[key]

    with _lock:
        if len(_shapes) > 4096:  # schemas are few; a flood of odd ones must not grow this forever
            _shapes.clear()
        form = _Form(None if shape is None else _shapes.setdefault(shape, shape), rows)
        _forms[key] = (weakref.ref(table, forget), form)
    return form


def merge_small(
    tables: Sequence[pa.Table],
    keys: Sequence[str],
    aggregates: Sequence[tuple[str, str]],
    bucket: str,
) -> dict[str, Sequence[Any]] | None:
    """Columns `bucket` and each aggregate column of the merged rows, or None when the inputs
    are not ones this merge reproduces exactly (see the module doc).

    `keys` the grouping keys (none: one row stamped with the earliest bucket, or just `bucket`);
    `aggregates` (column, function) pairs.
    """
    if not tables or len(tables) > PYTHON_MERGE_MAX_TABLES or list(keys) not in ([], [bucket]):
        return None
    if any(f not in _FUNCTIONS for _, f in aggregates):
        return None
    forms: list[_Form] = []
    shape = None
    for table in tables:  # a hundred cached partials: kept lean, the memo's hit inlined
        entry = _forms.get(id(table))
        form = entry[1] if entry is not None and entry[0]() is table else _form(table)
        if form is None or form.shape is None or (shape is not None and form.shape is not shape):
            return None
        shape = form.shape
        forms.append(form)
    assert shape is not None
    types = dict(shape)
    if types.get(bucket) != "int64" or any(types.get(c) not in _AGG_TYPES for c, _ in aggregates):
        return None
    names = [name for name, _ in shape]
    rows = list(chain.from_iterable([f.rows for f in forms]))
    if not rows or len(rows) > PYTHON_MERGE_MAX_ROWS:
        return None
    columns: dict[str, Sequence[Any]] = dict(zip(names, zip(*rows, strict=True), strict=True))
    if not keys:
        return _one_group(tables, columns, aggregates, bucket)
    buckets = columns[bucket]
    if None in buckets or len(set(buckets)) != len(buckets):  # rows to combine: Arrow's group_by
        return None
    out = {c: columns[c] for c, _ in aggregates}
    out[bucket] = buckets
    return out


def _one_group(
    tables: Sequence[pa.Table],
    columns: dict[str, Sequence[Any]],
    aggregates: Sequence[tuple[str, str]],
    bucket: str,
) -> dict[str, Sequence[Any]]:
    """No keys: one row, each value by Arrow's scalar kernel (float sums are pairwise there)."""
    schema = tables[0].schema
    out: dict[str, Sequence[Any]] = {}
    for c, f in aggregates:
        values = pa.array(columns[c], schema.field(c).type)
        out[c] = [getattr(pc, f)(values).as_py()]
    out[bucket] = [min((b for b in columns[bucket] if b is not None), default=None)]
    return out
