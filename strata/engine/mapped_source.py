"""Segment files a data node also holds as Arrow tables (memory-mapped local copies): scanned instead.

A historical keeps, beside each loaded segment's `index.parquet`, an uncompressed Arrow copy it
memory-maps, and registers that table here under the Parquet file's path. The Parquet file stays
the segment's identity (footer schema, statistics, column sizes and footer answers still come
from it); only row scans read the table, so no query decodes Parquet pages.

Each registered table carries a small integer column, `ORDINAL`, constant per segment and
assigned at registration (the lowest free number). Whole segments of one request are concatenated
(zero copy) into one table, registered once as a DuckDB view, and their labels are looked up from
the ordinal in SQL, as the multi-file Parquet scan looks them up from DuckDB's `file_index`.
Views live on the worker thread's own connection for one request (`request_views`), so a dropped
segment's table is not pinned after the requests reading it end.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from strata.query.duck import connection, quote_ident

ORDINAL = "__strata_ordinal"
BATCH_ROWS = 122_880  # DuckDB's row group size: one scan task per batch
_SMALL_BATCH = 8_192  # below this many rows per batch on average, a view's batches are merged first


@dataclass(frozen=True, eq=False)
class MappedRows:
    """One segment's rows as an Arrow table with its `ORDINAL` column appended."""

    table: pa.Table
    ordinal: int
    types: Mapping[str, pa.DataType] = field(default_factory=dict)  # by column, looked up per request


_lock = threading.Lock()
_tables: dict[str, MappedRows] = {}
_free: list[int] = []  # ordinals given back by unregistered segments, reused lowest first
_next = 0
_local = threading.local()
_CACHED_VIEWS = 4
# combined tables of recent requests, by their tables and columns: a request over thousands of
# segments spends more on gathering chunks than DuckDB spends scanning them. The tables are kept
# in the value so the ids in the key stay theirs; any registration change empties the cache.
_Key = tuple[tuple[int, ...], tuple[str, ...]]
_recent: OrderedDict[_Key, tuple[tuple[pa.Table, ...], pa.Table]] = OrderedDict()
_generation = 0
_forgetting: list[Callable[[], None]] = []


def register(path: str, table: pa.Table) -> bool:
    """Serve the rows of segment file `path` from `table` (same columns and types as the file).
    False, and nothing registered, when the table has a column named like the ordinal."""
    global _next
    if ORDINAL in table.column_names:
        return False
    with _lock:
        previous = _tables.get(path)
        if previous is not None:
            ordinal = previous.ordinal
        elif _free:
            _free.sort()
            ordinal = _free.pop(0)
        else:
            ordinal, _next = _next, _next + 1
        full = table.append_column(ORDINAL, _constant(table, ordinal))
        _tables[path] = MappedRows(full, ordinal, {f.name: f.type for f in full.schema})
        _changed()
    return True


def on_change(forget: Callable[[], None]) -> None:
    """Call `forget` whenever a registration changes (under this module's lock: it must not call
    back here): a cache pinning copies drops them, so an unregistered copy can be freed."""
    _forgetting.append(forget)


def _changed() -> None:
    """Under `_lock`: registrations changed, so no combined table of before is reused."""
    global _generation
    _generation += 1
    _recent.clear()
    for forget in _forgetting:
        forget()


def _constant(table: pa.Table, value: int) -> pa.ChunkedArray:
    """`value` for every row, chunked as the table is; every chunk slices one shared buffer."""
    chunks = table.column(0).chunks if table.num_columns else []
    longest = max((len(c) for c in chunks), default=0)
    shared = pa.array(np.full(longest, value, np.int32))
    return pa.chunked_array([shared.slice(0, len(c)) for c in chunks], pa.int32())


def unregister(path: str) -> None:
    with _lock:
        gone = _tables.pop(path, None)
        if gone is not None:
            _free.append(gone.ordinal)
            _changed()


def mapped(path: str) -> MappedRows | None:
    """The registered rows of segment file `path`, if it has an Arrow copy."""
    with _lock:
        return _tables.get(path)


def view(
    rows: Sequence[MappedRows],
    columns: Sequence[str],
    codes: tuple[str, str] | None = None,
    extra: Sequence[tuple[str, pa.ChunkedArray]] = (),
) -> str:
    """A DuckDB view (quoted name) over `columns` and `ORDINAL` of all `rows`, one table in order.

    All `rows` must have the same types for `columns`. `codes` (column, name) adds the dictionary
    indices of that dictionary column as `name` (each copy's codes point into its own dictionary).
    Each of `extra` (name, values) adds a column computed for this request, one value per row of
    `rows` in order. Registered on this thread's connection until the enclosing `request_views`
    ends; the same rows and columns again in it reuse the view.
    """
    names = [*columns, ORDINAL] + ([f"{codes[1]}={codes[0]}"] if codes else [])
    tables = tuple(r.table for r in rows)
    key = (tuple(map(id, tables)), tuple(names))
    state = _state()
    named = (key[0], (*key[1], *(f"{n}@{id(values)}" for n, values in extra)))
    name = state.names.get(named)
    if name is None:
        name = f"__strata_arrow_{len(state.names)}"
        combined = _recent_combined(key, tables)
        for column, values in extra:
            combined = combined.append_column(column, values)
            state.pinned.append((values,))  # its id is in the key
        connection().register(name, combined)
        state.names[named] = name
        state.pinned.append(tables)  # the ids in `key` stay theirs meanwhile
    return quote_ident(name)


def _recent_combined(key: _Key, tables: tuple[pa.Table, ...]) -> pa.Table:
    with _lock:
        hit = _recent.get(key)
        if hit is not None:
            _recent.move_to_end(key)
            return hit[1]
        generation = _generation
    combined = _combined(tables, key[1])
    with _lock:
        if generation == _generation:  # else a segment went meanwhile: keep nothing of it pinned
            _recent[key] = (tables, combined)
            while len(_recent) > _CACHED_VIEWS:
                _recent.popitem(last=False)
    return combined


def _combined(tables: Sequence[pa.Table], names: Sequence[str]) -> pa.Table:
    """Columns `names` of `tables` as one table without copying rows; many tiny batches (thousands of
    small segments) are merged into batches of `BATCH_ROWS`, as DuckDB pays per batch. A name
    `alias=column` is the dictionary indices of `column` (see `view`)."""
    first = tables[0].schema
    arrays = []
    for n in names:
        source = n.partition("=")[2]
        if source:
            kind = first.field(source).type.index_type
            arrays.append(
                pa.chunked_array([c.indices for t in tables for c in t.column(source).chunks], kind)
            )
        else:
            arrays.append(
                pa.chunked_array([c for t in tables for c in t.column(n).chunks], first.field(n).type)
            )
    table = pa.Table.from_arrays(arrays, names=[n.partition("=")[0] for n in names])
    chunks = table.column(0).num_chunks
    if chunks > 1 and table.num_rows < _SMALL_BATCH * chunks:
        merged = table.combine_chunks().to_batches(max_chunksize=BATCH_ROWS)
        table = pa.Table.from_batches(merged, table.schema)
    return table


@dataclass
class _Views:
    names: dict[_Key, str]
    pinned: list[tuple[pa.Table | pa.ChunkedArray, ...]]


def _state() -> _Views:
    state: _Views | None = getattr(_local, "views", None)
    if state is None:
        state = _local.views = _Views({}, [])
    return state


@contextmanager
def request_views() -> Iterator[None]:
    """Views made within it are dropped when it ends (nested: when the outermost one ends)."""
    if getattr(_local, "depth", 0):
        yield
        return
    _local.depth = 1
    try:
        yield
    finally:
        _local.depth = 0
        state = _state()
        if state.names:
            conn = connection()
            for name in state.names.values():
                conn.unregister(name)
        _local.views = None
