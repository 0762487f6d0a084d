"""One live segment (Druid's "sink"): the rows of one time bucket, in memory and in persisted parts.

Rows arrive as small Arrow tables (one per pushed batch) and are kept as they are: concatenating
them is zero-copy, so a query's snapshot costs nothing per row. A persist moves them to a Parquet
part on local disk (rolled up, sorted); until the part is written they stay visible in memory, so
a query never misses rows in between. Mutated on the event loop only; `rows()` is the immutable
snapshot the engine reads through `segment_engine.memory_source`.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ingestion.normalize import metric_input
from ingestion.rollup import CHUNK, segment_order, segment_rows
from ingestion.spec import DimensionSpec, MetricSpec
from segment_engine.memory_source import MemoryRows, memory_key, register, unregister
from timeline import DataSegment, Interval

TIME = "__time"
TIME_TYPE = pa.timestamp("ms", tz="UTC")


@dataclass(frozen=True, eq=False)
class _View:
    """What a query sees of a sink at one moment; its table is concatenated on first use, in the
    query's thread, so ingesting a batch costs no copy and no concatenation."""

    tables: tuple[pa.Table, ...]
    files: tuple[str, ...]
    columns: dict[str, pa.DataType]
    file_rows: int
    file_bytes: int
    time_range: tuple[int, int] | None
    facts: dict[str, Any]

    @functools.cached_property
    def rows(self) -> MemoryRows:
        schema = pa.schema([pa.field(n, t) for n, t in self.columns.items()])
        table = (
            pa.concat_tables(self.tables, promote_options="default") if self.tables else schema.empty_table()
        )
        sizes = {name: table.column(name).nbytes for name in table.column_names}
        if self.file_bytes and self.columns:
            share = self.file_bytes // len(self.columns)
            sizes = {name: sizes.get(name, 0) + share for name in self.columns}
        return MemoryRows(
            table=table,
            files=self.files,
            columns=self.columns,
            num_rows=table.num_rows + self.file_rows,
            time_range=self.time_range,
            facts=self.facts,
            part_bytes=sizes,
        )


@dataclass
class Sink:
    segment: DataSegment
    batches: list[pa.Table] = field(default_factory=list)  # in memory since the last persist
    persisting: list[pa.Table] = field(default_factory=list)  # being written to a part right now
    files: list[str] = field(default_factory=list)  # persisted parts
    part_ranges: dict[str, tuple[int, int]] = field(default_factory=dict)  # first and last __time of each
    file_rows: int = 0
    file_bytes: int = 0
    time_range: tuple[int, int] | None = None
    columns: dict[str, pa.DataType] = field(default_factory=dict)
    closed: bool = False  # handing off: rows for this bucket are refused
    published: bool = False
    facts: dict[str, Any] = field(default_factory=dict)
    rows_in_memory: int = 0  # in `batches` and `persisting`
    bytes_in_memory: int = 0

    @property
    def interval(self) -> Interval:
        return self.segment.interval

    @property
    def key(self) -> str:
        return memory_key(self.segment.id)

    def add(self, table: pa.Table) -> None:
        """Append one batch's rows (`__time` as timestamp ms, dimensions, metrics)."""
        if not table.num_rows:
            return
        self.batches.append(table)
        self.rows_in_memory += table.num_rows
        self.bytes_in_memory += table.nbytes
        for f in table.schema:
            self.columns.setdefault(f.name, f.type)
        bounds = pc.min_max(table.column(TIME).cast(pa.int64())).as_py()
        self._widen((bounds["min"], bounds["max"]))

    def _widen(self, span: tuple[int, int]) -> None:
        if self.time_range is not None:
            span = (min(span[0], self.time_range[0]), max(span[1], self.time_range[1]))
        self.time_range = span

    def begin_persist(self) -> list[pa.Table]:
        self.persisting, self.batches = self.batches, []
        return self.persisting

    def end_persist(self) -> None:
        """The part holding `persisting` is in `files` now: drop the in-memory copy."""
        self.rows_in_memory -= sum(t.num_rows for t in self.persisting)
        self.bytes_in_memory -= sum(t.nbytes for t in self.persisting)
        self.persisting = []

    def abort_persist(self) -> None:
        self.batches, self.persisting = self.persisting + self.batches, []

    def add_part(
        self, path: str, num_rows: int, size: int, schema: pa.Schema, time_range: tuple[int, int]
    ) -> None:
        self.files.append(path)
        self.part_ranges[path] = time_range
        self.file_rows += num_rows
        self.file_bytes += size
        for f in schema:
            self.columns.setdefault(f.name, f.type)
        self._widen(time_range)

    def remove_part(self, path: str, num_rows: int, size: int) -> None:
        if path in self.files:
            self.files.remove(path)
            self.file_rows -= num_rows
            self.file_bytes -= size

    def rows(self) -> MemoryRows:
        return self._view().rows

    def _view(self) -> _View:
        return _View((*self.persisting, *self.batches), tuple(self.files), dict(self.columns), self.file_rows,
                     self.file_bytes, self.time_range, self.facts)  # fmt: skip

    def publish_rows(self) -> None:
        """Make the current rows what queries read (cheap: the table is built by the first query)."""
        view = self._view()
        register(self.key, lambda: view.rows)

    def forget(self) -> None:
        unregister(self.key)


def combined(
    tables: Sequence[pa.Table],
    dimensions: Sequence[DimensionSpec],
    metrics: Sequence[MetricSpec],
    rollup: bool,
) -> pa.Table:
    """Rows of several batches or parts as one segment's rows: rolled up again, in segment order.

    Rolling up already rolled-up rows combines each metric with itself (a count becomes a sum of
    counts), which is what Druid's combining aggregators do.
    """
    table = pa.concat_tables(tables, promote_options="default")
    dims = [d for d in dimensions if d.name in table.column_names]
    chunk = pa.array(np.zeros(table.num_rows, np.int64))
    if rollup and table.num_rows:
        combining = [MetricSpec("longSum" if m.type == "count" else m.type, m.name, m.name) for m in metrics]
        renamed = table.rename_columns(
            [metric_input(m) if m.name == c else c for c, m in _by_name(table, metrics)]
        )
        table = segment_rows(renamed.append_column(CHUNK, chunk), dims, combining, True)
    else:
        table = table.append_column(CHUNK, chunk)
    table = table.take(segment_order(table, dims))
    return table.drop_columns([CHUNK])


def _by_name(table: pa.Table, metrics: Sequence[MetricSpec]) -> list[tuple[str, MetricSpec]]:
    names = {m.name: m for m in metrics}
    none = MetricSpec("count", "")
    return [(c, names.get(c, none)) for c in table.column_names]
