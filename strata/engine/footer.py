"""A segment file's Parquet footer, parsed once per file and kept: segment files never change.

Schema, row count, ingestion facts, `__time` range, column sizes and per-column statistics all
come from the one parse. Reading the footer costs a file open and a thrift decode (~100 us); a
query over 10,000 segments would otherwise pay it several times per segment, on every query.
The cache is keyed by path and modification time, so a file replaced in place is parsed afresh.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

import pyarrow as pa
import pyarrow.parquet as pq

from strata.query.columns import TIME_COLUMN


@dataclass(frozen=True, slots=True)
class ColumnStats:
    """A column's statistics over every row group: min/max of its non-null values, null count.

    `low`/`high` are None when every value is null (there is then nothing to compare).
    """

    low: int | float | None
    high: int | float | None
    null_count: int


@dataclass(eq=False)
class Footer:
    """One file's parsed footer; column statistics are gathered on first use, then kept."""

    meta: pq.FileMetaData
    schema: pa.Schema
    size: int
    _stats: dict[str, ColumnStats | None] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def num_rows(self) -> int:
        return int(self.meta.num_rows)

    @functools.cached_property
    def time_span(self) -> tuple[int, int] | None:
        """First and last `__time` (epoch ms, from the statistics); None without them or rows."""
        if self.num_rows == 0 or TIME_COLUMN not in self.schema.names:
            return None
        field_type = self.schema.field(TIME_COLUMN).type
        if not (pa.types.is_timestamp(field_type) and field_type.unit == "ms"):
            return None
        stats = self.column_stats(TIME_COLUMN)
        if stats is None or stats.low is None or stats.high is None:
            return None
        return int(stats.low), int(stats.high)

    def column_stats(self, name: str) -> ColumnStats | None:
        """Statistics of top-level column `name`, or None when some row group lacks them."""
        with self._lock:
            if name not in self._stats:
                self._stats[name] = _gather(self.meta, name)
            return self._stats[name]

    def null_count(self, name: str) -> int | None:
        """Nulls of top-level column `name` over every row group, or None when some group lacks the
        count (or `name` is absent or nested)."""
        col, nulls = _leaf(self.meta, name), 0
        if col is None:
            return None
        for g in range(self.meta.num_row_groups):
            stats = self.meta.row_group(g).column(col).statistics
            if stats is None or not stats.has_null_count:
                return None
            nulls += stats.null_count
        return nulls

    def column_sizes(self) -> dict[str, int]:
        """Compressed bytes of each top-level column."""
        sizes: dict[str, int] = {}
        for g in range(self.meta.num_row_groups):
            group = self.meta.row_group(g)
            for c in range(group.num_columns):
                column = group.column(c)
                name = column.path_in_schema.split(".")[0]
                sizes[name] = sizes.get(name, 0) + column.total_compressed_size
        return sizes


def _leaf(meta: pq.FileMetaData, name: str) -> int | None:
    """The Parquet column of top-level column `name`; None when absent, or nested (its leaves are
    named `name.…`)."""
    paths = [meta.schema.column(i).path for i in range(meta.num_columns)]
    return paths.index(name) if name in paths else None


def _gather(meta: pq.FileMetaData, name: str) -> ColumnStats | None:
    col = _leaf(meta, name)
    if col is None:
        return None
    lows: list[Any] = []
    highs: list[Any] = []
    nulls = 0
    for g in range(meta.num_row_groups):
        group = meta.row_group(g)
        if group.num_rows == 0:
            continue
        stats = group.column(col).statistics
        if stats is None or not stats.has_null_count:
            return None
        nulls += stats.null_count
        if stats.has_min_max:
            lows.append(stats.min_raw)
            highs.append(stats.max_raw)
        elif stats.null_count != group.num_rows:
            return None  # values present but no min/max written
    if not all(isinstance(v, int | float) for v in (*lows, *highs)):
        return None  # strings, bytes: not what the engine answers from statistics
    return ColumnStats(min(lows, default=None), max(highs, default=None), nulls)


_parsed: set[str] = set()  # paths parsed at least once (a set's add and `in` are atomic)


@functools.lru_cache(maxsize=65536)
def _parse(path: str, mtime_ns: int) -> Footer:
    meta = pq.read_metadata(path)
    footer = Footer(meta, meta.schema.to_arrow_schema(), os.path.getsize(path))
    _parsed.add(path)
    return footer


def footer_parsed(path: str) -> bool:
    """Whether `path`'s footer was parsed before: reading it again is then (almost always) a cache
    hit, cheap enough for the event loop (a file changed since, or evicted, is parsed once more)."""
    return path in _parsed


def read_footer(path: str) -> Footer:
    """The footer of segment file `path`, parsed on first use (again only if the file changed)."""
    return _parse(path, file_version(path))


_request = threading.local()
T = TypeVar("T")


@contextmanager
def one_look_per_file() -> Iterator[None]:
    """Within it, what `per_request` computes for a file is kept on this thread: a request asks
    for a segment's version, schema and time range several times, and 10,000 segments add up."""
    if getattr(_request, "memo", None) is not None:
        yield  # nested: the outer request's looks hold
        return
    _request.memo = {}
    try:
        yield
    finally:
        _request.memo = None


def per_request(kind: str, path: str, compute: Callable[[str], T]) -> T:
    """`compute(path)`, once per request (see `one_look_per_file`), every time outside one."""
    memo: dict[tuple[str, str], Any] | None = getattr(_request, "memo", None)
    if memo is None:
        return compute(path)
    key = (kind, path)
    if key not in memo:
        memo[key] = compute(path)
    return cast(T, memo[key])


def _mtime_ns(path: str) -> int:
    return os.stat(path).st_mtime_ns


def file_version(path: str) -> int:
    """The file's modification time (ns): what the footer caches are keyed by."""
    return per_request("version", path, _mtime_ns)


def time_span(path: str) -> tuple[int, int] | None:
    """First and last `__time` (epoch ms) from the statistics; None without them or without rows."""
    return read_footer(path).time_span
