"""Prepared rows -> staged segment files -> published segments: the part every engine shares.

`build_segments` takes the rows of whole time chunks (from `ingestion.prepare`), rolls them up,
sorts them, cuts partitions (`ingestion.partitioning`) and writes one Parquet file per partition
into a staging directory; the local engine runs it once over everything, a Spark task over the
chunks it was given, so both cut identical segments. `publish_segments` then moves staged
segments into deep storage and publishes them in one metadata transaction, removing whatever it
pushed if anything fails, so nothing is ever half-published.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from strata.ingestion.errors import CannotAppend
from strata.ingestion.memory_pool import INGEST_POOL
from strata.ingestion.normalize import TIME
from strata.ingestion.partitioning import plan_partitions
from strata.ingestion.rollup import CHUNK, segment_order, segment_rows
from strata.ingestion.segment_columns import harmonized, stored_columns
from strata.ingestion.spec import (
    DimensionSpec,
    HashedPartitions,
    IngestionSpec,
    PartitionsSpec,
    RangePartitions,
)
from strata.ingestion.summary import NoProgress, Progress, SegmentWritten
from strata.storage.deep_storage import SEGMENT_FILE, DeepStorage
from strata.storage.metadata_store import MetadataStore, Replacement
from strata.storage.segment_file import ROW_GROUP_ROWS, write_segment_pieces
from timeline import DataSegment, Interval, format_instant, parse_instant

log = logging.getLogger(__name__)

_WORKERS = min(4, os.cpu_count() or 1)
PUSH_THREADS = 8

ChunkTarget = tuple[Interval, str, int, int | None]
"""Per time chunk: (interval, version, first partition number, core partition count or None)."""


@dataclass(frozen=True)
class StagedSegment:
    """A segment file written in staging (or pushed by a Spark task), not yet published."""

    segment: DataSegment  # no loadSpec or size yet, unless `pushed`
    directory: str  # holds index.parquet
    rows: int
    pushed: bool = False  # pushed by the task that built it, waiting for the driver's publish


def new_version(existing: Sequence[DataSegment]) -> str:
    """Now as an ISO instant, but always later than every existing version, so the new data overshadows."""
    now = int(datetime.now(UTC).timestamp() * 1000)
    for seg in existing:
        try:
            now = max(now, parse_instant(seg.version) + 1)
        except ValueError:
            continue
    return format_instant(now)


def replacement(spec: IngestionSpec) -> Replacement | None:
    """What the spec's publish drops besides what its segments overshadow (a SQL REPLACE)."""
    return None if spec.replace is None else Replacement(spec.data_source, spec.replace)


def chunk_targets(
    spec: IngestionSpec, chunk_starts: Iterable[int], existing: Sequence[DataSegment], version: str
) -> dict[int, ChunkTarget]:
    """Where each chunk's partitions go: appends join the latest version of a chunk, overwrites
    use the new version."""
    out: dict[int, ChunkTarget] = {}
    for start in sorted(set(chunk_starts)):
        interval = Interval(start, spec.granularity.segment.bucket_end(start))
        target: ChunkTarget = (interval, version, 0, None)
        if spec.append:
            overlapping = [s for s in existing if s.interval.overlaps(interval)]
            if overlapping:
                latest = max(s.version for s in overlapping)
                mine = [s for s in overlapping if s.version == latest]
                if any(s.interval != interval for s in mine):
                    raise CannotAppend(
                        f"cannot append to {spec.data_source} at {interval}: existing segments of version"
                        f" {latest}"
                        f" cover {mine[0].interval}; append with the same segmentGranularity"
                    )
                core = max((s.shard_spec.partitions or 1) if s.shard_spec.type != "none" else 1 for s in mine)
                target = (interval, latest, max(s.partition_num for s in mine) + 1, core)
        out[start] = target
    return out


def segment_facts(
    spec: IngestionSpec,
    seg: DataSegment,
    dims: Sequence[dict[str, Any]],
    num_rows: int,
    *,
    final: bool = True,
) -> dict[str, object]:
    """The segment file's footer facts; without version and partition number when not `final`
    (a Spark writer task cannot know them: its driver numbers partitions at commit). `dims` are the
    dimension entries `stored_columns` made (`strata.storage.segment_layout`)."""
    facts: dict[str, object] = {"dataSource": seg.data_source, "interval": str(seg.interval)}
    if final:
        facts |= {"version": seg.version, "partitionNum": seg.partition_num}
    return facts | {
        "dimensions": list(dims),
        "metrics": [m.to_json() for m in spec.metrics],
        "queryGranularity": spec.granularity.query.to_json(),
        "rollup": spec.granularity.rollup,
        "numRows": num_rows,
    }


def build_segments(
    parts: list[pa.Table],
    dims: list[DimensionSpec],
    spec: IngestionSpec,
    existing: Sequence[DataSegment],
    version: str,
    staging: Path,
    progress: Progress | None = None,
    *,
    final: bool = True,
) -> list[StagedSegment]:
    """Roll up, sort, partition and write the prepared rows of whole time chunks into `staging`.

    `parts` (prepared tables, in input order) is emptied once combined, so its memory goes early.
    """
    progress = progress or NoProgress()
    progress.phase("rollup" if spec.granularity.rollup else "sort")
    table = pa.concat_tables(harmonized(parts, dims), promote_options="default")
    parts.clear()
    rows = segment_rows(table, dims, spec.metrics, spec.granularity.rollup)
    del table
    rows, order = _combined_and_ordered(rows, dims)
    progress.phase("partition")
    dim_names = [d.name for d in dims]
    order_np = order.to_numpy()
    chunks = rows.column(CHUNK).to_numpy()[order_np]
    needed = _partition_columns(spec.tuning.partitions, dim_names)
    keyed = pc.take(rows.select(needed), order, memory_pool=INGEST_POOL) if needed else rows.select([])
    plans = plan_partitions(chunks, keyed, spec.tuning.partitions, dim_names)
    del keyed, chunks
    rows = rows.drop_columns([CHUNK])
    rows = rows.set_column(0, TIME, pc.cast(rows.column(TIME), pa.timestamp("ms", tz="UTC")))
    targets = chunk_targets(spec, (p.chunk_start for p in plans), existing, version)
    segments = [
        DataSegment(
            data_source=spec.data_source,
            interval=targets[plan.chunk_start][0],
            version=targets[plan.chunk_start][1],
            dimensions=tuple(dim_names),
            metrics=tuple(m.name for m in spec.metrics),
            shard_spec=plan.shard_spec(*targets[plan.chunk_start][2:]),
        )
        for plan in plans
    ]
    progress.phase("write")
    staging.mkdir(parents=True, exist_ok=True)

    def write(i: int) -> StagedSegment:
        seg_dir = staging / str(i)
        seg_dir.mkdir()
        idx = order_np[plans[i].rows]
        schema, pieces, entries = _segment_pieces(rows, idx, dims)
        facts = segment_facts(spec, segments[i], entries, idx.size, final=final)
        write_segment_pieces(schema, pieces, seg_dir / SEGMENT_FILE, facts)
        return StagedSegment(segments[i], str(seg_dir), int(idx.size))

    # gathering rows and Parquet encoding release the GIL: build segments side by side
    with ThreadPoolExecutor(max_workers=_WORKERS) as pool:
        return list(pool.map(write, range(len(plans))))


def publish_segments(
    deep: DeepStorage,
    store: MetadataStore,
    staged: Sequence[StagedSegment],
    *,
    overwrite: bool,
    replace: Replacement | None = None,
) -> list[SegmentWritten]:
    """Push staged segments into deep storage (those a task pushed already keep their place) and
    publish them all in one transaction: the publish comes last, so a segment is never used
    before its file is whole in deep storage.

    On any failure (or interrupt) every pushed segment is deleted again and nothing is
    published; the caller removes its staging directory either way.
    """
    pushed = [SegmentWritten(s.segment, s.rows) for s in staged if s.pushed]
    try:
        pushed += [
            SegmentWritten(s.segment, s.rows) for s in push_staged(deep, [s for s in staged if not s.pushed])
        ]
        segments = [w.segment for w in pushed]
        if replace is None:
            store.publish(segments, overwrite=overwrite)
        else:
            store.publish(segments, overwrite=overwrite, replace=replace)
    except BaseException:
        discard(deep, [w.segment for w in pushed])
        raise
    return pushed


def push_staged(deep: DeepStorage, staged: Sequence[StagedSegment]) -> list[StagedSegment]:
    """Push staged segments, `PUSH_THREADS` at a time (an upload to an object store mostly waits on
    the network). Where they were built: a Spark task pushes its own and the driver publishes them,
    or `discard`s them if the job fails. On any failure every segment pushed here is deleted again."""
    done: list[StagedSegment] = []
    failure: BaseException | None = None
    with ThreadPoolExecutor(max_workers=PUSH_THREADS) as pool:
        futures = [pool.submit(deep.push, Path(s.directory), s.segment) for s in staged]
        for s, future in zip(staged, futures, strict=True):
            try:
                done.append(StagedSegment(future.result(), "", s.rows, pushed=True))
            except BaseException as e:  # the rest still finish, so every push is known
                failure = failure or e
    if failure is not None:
        discard(deep, [s.segment for s in done])
        raise failure
    return done


def discard(deep: DeepStorage, segments: Sequence[DataSegment]) -> None:
    """Delete pushed, unpublished segments, best effort (`strata segments cleanup` finds the rest)."""
    for seg in segments:
        try:
            deep.delete(seg)
        except Exception as e:
            log.warning("could not delete unpublished segment %s from deep storage: %s", seg.id, e)


def _segment_pieces(
    rows: pa.Table, idx: np.ndarray, dims: Sequence[DimensionSpec]
) -> tuple[pa.Schema, Iterable[pa.Table], list[dict[str, Any]]]:
    """A segment's schema, its rows in row groups, and its dimension entries.

    Plain columns are gathered one row group at a time (small buffers the allocator reuses, not
    fresh pages); a segment with lists or values typed by their values is gathered whole first,
    since its columns' stored form depends on all of its rows (`segment_columns.stored_columns`).
    """
    if not any(d.typed_by_values or pa.types.is_list(rows.schema.field(d.name).type) for d in dims):
        entries = stored_columns(rows.slice(0, 0), dims)[1]
        pieces = (_take(rows, idx[lo : lo + ROW_GROUP_ROWS]) for lo in range(0, idx.size, ROW_GROUP_ROWS))
        return rows.schema, pieces, entries
    table, entries = stored_columns(_take(rows, idx), dims)
    return (
        table.schema,
        (table.slice(lo, ROW_GROUP_ROWS) for lo in range(0, idx.size, ROW_GROUP_ROWS)),
        entries,
    )


def _combined_and_ordered(rows: pa.Table, dims: list[DimensionSpec]) -> tuple[pa.Table, pa.UInt64Array]:
    """`rows` with one contiguous array per column (gathering segments from one is ~3x faster than
    from chunks), and their segment order; the sort runs while the columns are copied."""
    with ThreadPoolExecutor(max_workers=_WORKERS) as pool:
        order = pool.submit(segment_order, rows, dims)
        columns = list(pool.map(lambda c: c.combine_chunks(INGEST_POOL), rows.columns))
        return pa.Table.from_arrays(columns, schema=rows.schema), order.result()


def _partition_columns(partitions: PartitionsSpec, dimensions: list[str]) -> list[str]:
    """The columns `plan_partitions` reads, so only they are gathered in sort order up front."""
    if isinstance(partitions, HashedPartitions):
        return list(partitions.partition_dimensions) or [TIME, *dimensions]
    if isinstance(partitions, RangePartitions):
        return list(partitions.dimensions)
    return []


def _take(rows: pa.Table, idx: np.ndarray) -> pa.Table:
    """The rows at `idx`; a zero-copy slice when they are a run already in order (e.g. presorted input)."""
    if idx.size and int(idx[-1]) - int(idx[0]) + 1 == idx.size and bool((np.diff(idx) == 1).all()):
        return rows.slice(int(idx[0]), idx.size)
    return pc.take(rows, pa.array(idx), memory_pool=INGEST_POOL)
