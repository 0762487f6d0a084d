"""One live segment (Druid's "sink"): the rows of one time bucket, in memory and in persisted parts.

Rows arrive as small Arrow tables (one per pushed batch), joined every few dozen batches into one
larger table (scans over few large chunks are fast); concatenating them is zero-copy, so a query's
snapshot costs nothing per row. A persist moves them to a part on local disk (rolled up, sorted,
memory-mapped back); until the part is written they stay visible in memory, so a query never
misses rows in between. Mutated on the event loop only; `rows()` is the immutable
snapshot the engine reads through `strata.engine.memory_source`.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from strata.engine.memory_source import MemoryRows, memory_key, register, unregister
from strata.ingestion.normalize import metric_input
from strata.ingestion.rollup import CHUNK, segment_order, segment_rows
from strata.ingestion.segment_columns import harmonized, stored_columns
from strata.ingestion.spec import DimensionSpec, MetricSpec
from strata.storage.segment_layout import dimension_entries
from timeline import DataSegment, Interval

TIME = "__time"
TIME_TYPE = pa.timestamp("ms", tz="UTC")
COMPACT_BATCHES = 32  # small batches joined into one table


@dataclass(frozen=True, eq=False)
class WrittenPart:
    """A persisted part: where it is and its rows, memory-mapped."""

    path: str
    num_rows: int
    size: int
    table: pa.Table
    time_range: tuple[int, int]


@dataclass(frozen=True, eq=False)
class _View:
    """What a query sees of a sink at one moment; its table is concatenated on first use, in the
    query's thread, so ingesting a batch costs no copy and no concatenation."""

    tables: tuple[pa.Table, ...]  # persisted parts (memory-mapped) and batches in memory
    columns: dict[str, pa.DataType]
    interval: tuple[int, int]
    time_range: tuple[int, int] | None
    facts: dict[str, Any]

    @functools.cached_property
    def rows(self) -> MemoryRows:
        schema = pa.schema([pa.field(n, t) for n, t in self.columns.items()])
        dims = fact_dimensions(self.facts)
        table = concatenated(self.tables, dims) if self.tables else schema.empty_table()
        table, facts = stored_view(table, dims, self.facts)
        return MemoryRows(
            table=table,
            columns={f.name: f.type for f in table.schema},
            num_rows=table.num_rows,
            interval=self.interval,
            time_range=self.time_range,
            facts=facts,
            part_bytes={name: table.column(name).nbytes for name in table.column_names},
        )


@dataclass
class Sink:
    segment: DataSegment
    batches: list[pa.Table] = field(default_factory=list)  # in memory since the last persist
    persisting: list[pa.Table] = field(default_factory=list)  # being written to a part right now
    files: list[str] = field(default_factory=list)  # persisted parts
    parts: dict[str, pa.Table] = field(default_factory=dict)  # each part's rows, memory-mapped
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
    _fresh: int = 0  # batches added since the last compaction

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
        self._fresh += 1
        if self._fresh >= COMPACT_BATCHES:
            self._compact_tail()
        for f in table.schema:
            self.columns.setdefault(f.name, f.type)
        bounds = pc.min_max(table.column(TIME).cast(pa.int64())).as_py()
        self._widen((bounds["min"], bounds["max"]))

    def _compact_tail(self) -> None:
        """Join the latest small batches into one contiguous table: a scan over thousands of
        tiny chunks costs DuckDB several times a scan over the same rows in a few large ones."""
        tail = self.batches[-self._fresh :]
        joined = concatenated(tail, fact_dimensions(self.facts)).combine_chunks()
        self.bytes_in_memory += joined.nbytes - sum(t.nbytes for t in tail)
        self.batches[-self._fresh :] = [joined]
        self._fresh = 0

    def _widen(self, span: tuple[int, int]) -> None:
        if self.time_range is not None:
            span = (min(span[0], self.time_range[0]), max(span[1], self.time_range[1]))
        self.time_range = span

    def begin_persist(self) -> list[pa.Table]:
        self.persisting, self.batches, self._fresh = self.batches, [], 0
        return self.persisting

    def end_persist(self) -> None:
        """The part holding `persisting` is in `files` now: drop the in-memory copy."""
        self.rows_in_memory -= sum(t.num_rows for t in self.persisting)
        self.bytes_in_memory -= sum(t.nbytes for t in self.persisting)
        self.persisting = []

    def abort_persist(self) -> None:
        self.batches, self.persisting, self._fresh = self.persisting + self.batches, [], 0

    def add_part(self, part: WrittenPart) -> None:
        self.files.append(part.path)
        self.parts[part.path] = part.table
        self.part_ranges[part.path] = part.time_range
        self.file_rows += part.num_rows
        self.file_bytes += part.size
        for f in part.table.schema:
            self.columns.setdefault(f.name, f.type)
        self._widen(part.time_range)

    def rows(self) -> MemoryRows:
        return self._view().rows

    def _view(self) -> _View:
        tables = (*(self.parts[f] for f in self.files), *self.persisting, *self.batches)
        bounds = (self.interval.start, self.interval.end)
        return _View(tables, dict(self.columns), bounds, self.time_range, self.facts)

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
    table = concatenated(tables, dimensions)
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


def fact_dimensions(facts: dict[str, Any]) -> list[DimensionSpec]:
    """The dimensions a sink's facts list (what its batches were normalized with)."""
    return [
        DimensionSpec(d["name"], d.get("type", "string"), d.get("multiValueHandling") or "SORTED_ARRAY")
        for d in dimension_entries(facts)
    ]


def concatenated(tables: Sequence[pa.Table], dims: Sequence[DimensionSpec]) -> pa.Table:
    """Batches and parts as one table, their dimension columns first lined up (`harmonized`): a
    batch with lists beside one without, a column one batch lacks."""
    present = [d for d in dims if any(d.name in t.column_names for t in tables)]
    return pa.concat_tables(harmonized(tables, present), promote_options="default")


def stored_view(
    table: pa.Table, dims: Sequence[DimensionSpec], facts: dict[str, Any]
) -> tuple[pa.Table, dict[str, Any]]:
    """Live rows in the form their segment will store them (`segment_columns.stored_columns`), and
    the facts that say so, when some dimension's form depends on the rows; else as they are."""
    present = [d for d in dims if d.name in table.column_names]
    if not any(d.typed_by_values or pa.types.is_list(table.schema.field(d.name).type) for d in present):
        return table, facts
    stored, entries = stored_columns(table, present)
    return stored, {**facts, "dimensions": entries}


def _by_name(table: pa.Table, metrics: Sequence[MetricSpec]) -> list[tuple[str, MetricSpec]]:
    names = {m.name: m for m in metrics}
    none = MetricSpec("count", "")
    return [(c, names.get(c, none)) for c in table.column_names]
