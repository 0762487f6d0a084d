"""Segment rows held in memory (a real-time node's live segments), beside rows in Parquet files.

The engine names a segment's rows by `SegmentInput.path`. A path starting with `memory:` is a key
registered here instead of a file: its rows are one Arrow table (the parts already persisted,
memory-mapped, and what arrived since the last persist). The owner
swaps in a new immutable `MemoryRows` whenever rows arrive; a query reads whichever is current.

DuckDB sees the Arrow table as a view registered on the worker thread's own connection, replaced
when the table changed and unregistered once its key is gone, so no stale table stays pinned.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from strata.query.duck import connection, quote_ident, quote_str

MEMORY_PREFIX = "memory:"
TIME_COLUMN = "__time"


@dataclass(frozen=True, eq=False)
class MemoryRows:
    """One live segment's rows as one Arrow table (chunks in memory or memory-mapped from disk)."""

    table: pa.Table  # `__time` as timestamp(ms, UTC), as in segment files
    columns: Mapping[str, pa.DataType] = field(default_factory=dict)
    num_rows: int = 0
    interval: tuple[int, int] | None = None  # [start, end) ms holding every row, now and later
    time_range: tuple[int, int] | None = None  # first and last `__time`, epoch ms
    facts: Mapping[str, Any] = field(default_factory=dict)  # as a segment file's footer
    part_bytes: Mapping[str, int] = field(default_factory=dict)  # bytes per column (segmentMetadata)


_lock = threading.Lock()
_rows: dict[str, MemoryRows | Callable[[], MemoryRows]] = {}
_views = threading.local()  # per thread: view name -> the table registered under it


def is_memory(path: str) -> bool:
    return path.startswith(MEMORY_PREFIX)


def memory_key(name: str) -> str:
    return MEMORY_PREFIX + name


def register(key: str, rows: MemoryRows | Callable[[], MemoryRows]) -> None:
    """`rows` or a function giving them, called by the query that needs them (so the owner need
    not build a snapshot on every change, only describe it)."""
    if not is_memory(key):
        raise ValueError(f"a memory key starts with {MEMORY_PREFIX!r}: {key!r}")
    with _lock:
        _rows[key] = rows


def unregister(key: str) -> None:
    with _lock:
        _rows.pop(key, None)


def lookup(path: str) -> MemoryRows:
    with _lock:
        rows = _rows.get(path)
    if rows is None:
        raise FileNotFoundError(f"live segment {path!r} is no longer served")
    return rows if isinstance(rows, MemoryRows) else rows()


def _view_name(key: str) -> str:
    return "__strata_" + key.encode().hex()


def source_sql(path: str) -> str:
    """The FROM item for one segment's rows: `read_parquet(...)`, or a live segment's Arrow view."""
    if not is_memory(path):
        return f"read_parquet({quote_str(path)})"
    rows = lookup(path)
    name = _view_name(path)
    conn = connection()
    views: dict[str, pa.Table] | None = getattr(_views, "tables", None)
    if views is None:
        views = _views.tables = {}
    with _lock:
        live = {_view_name(k) for k in _rows}
    for stale in [v for v in views if v not in live]:
        conn.unregister(stale)
        del views[stale]
    if views.get(name) is not rows.table:
        conn.register(name, rows.table)
        views[name] = rows.table
    return quote_ident(name)


def always_within(path: str, start: int, end: int) -> bool:
    """Whether every row the live segment `path` holds, now or later, lies in [start, end)."""
    bounds = lookup(path).interval
    return bounds is not None and start <= bounds[0] and bounds[1] <= end


def column_sizes(path: str) -> dict[str, int]:
    return dict(lookup(path).part_bytes)
