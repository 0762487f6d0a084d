"""The local ingestion engine: read -> normalize -> stage -> rollup/sort -> partition -> write -> publish.

Memory is bounded by a block and a few time chunks, not by the input: blocks (a run of Parquet row
groups, 16 MiB of text) are read, prepared and staged on disk grouped by time chunk one at a time
(`staged_rows`), then the segments are built from the staged rows a few whole time chunks at a
time (`BUILD_BYTES`). Segments are the same as when every row was in memory at once:
a chunk's rows come back in input order and every segment is cut within one chunk.

Crash safety: segments are written in a staging directory inside deep storage, moved into place
only once all of them are built, and published in one metadata transaction last. Any failure or
interrupt before the publish deletes what was pushed, so nothing half-done is ever served.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path

from strata.ingestion.errors import NothingToIngest, SpecError, TooManyParseExceptions
from strata.ingestion.fetch import NO_S3, InputStorage, S3Settings
from strata.ingestion.normalize import MAX_KEPT_PROBLEMS
from strata.ingestion.prepare import allowed_chunks, prepare_block
from strata.ingestion.readers import consecutive_runs, read_blocks, resolve_inputs
from strata.ingestion.segment_build import (
    StagedSegment,
    build_segments,
    new_version,
    publish_segments,
    replacement,
)
from strata.ingestion.spec import DimensionSpec, IngestionSpec
from strata.ingestion.staged_rows import Piece, read_pieces, write_pieces
from strata.ingestion.summary import IngestionSummary, NoProgress, Progress
from strata.storage.deep_storage import DeepStorage
from strata.storage.metadata_store import MetadataStore
from timeline import DataSegment

__all__ = ["check_granularity", "new_version", "run_local"]

BUILD_WORKERS = min(4, os.cpu_count() or 1)
BUILD_BYTES = 32 << 20
"""Prepared rows (Arrow bytes) of the time chunks built side by side at most (a larger chunk is
built alone); see `_build`. A build holds several times its rows' size while it rolls up, sorts
and writes: 10M rows rolled up into 336 hourly segments peaked at 585 MB with 32 MiB, 826 MB
with 64 and 1,185 MB with 128, and 32 MiB was no slower (10M rows, 96 hourly segments: 10.2 s
against 10.6-12.4 s with 128)."""


def check_granularity(spec: IngestionSpec) -> None:
    if spec.granularity.segment.is_none:
        raise SpecError("segmentGranularity 'none' would make a segment per millisecond; choose e.g. 'hour'")


def nothing_to_ingest(summary: IngestionSummary) -> NothingToIngest:
    return NothingToIngest(
        f"nothing to ingest: {summary.rows_read} rows read, {summary.parse_errors} unparseable, "
        f"{summary.rows_thrown_away} thrown away (outside granularitySpec.intervals or filtered)"
    )


def _stage(
    spec: IngestionSpec, summary: IngestionSummary, progress: Progress, rows_dir: Path, inputs: InputStorage
) -> tuple[list[Piece], list[DimensionSpec]]:
    """Read, prepare and stage every block (`staged_rows`), one block in memory at a time."""
    files = resolve_inputs(spec.input_source, inputs)
    progress.start(sum(f.size for f in files))
    allowed = allowed_chunks(spec)
    dims = list(spec.dimensions.dimensions)
    limit = spec.tuning.max_parse_exceptions
    pieces: list[Piece] = []
    rows_dir.mkdir(parents=True, exist_ok=True)
    for i, f in enumerate(files):
        for b, block in enumerate(read_blocks(f, spec.input_format)):
            prepared = prepare_block(block, spec, dims, allowed)
            dims = prepared.dimensions
            summary.rows_read += prepared.rows_read
            summary.parse_errors += prepared.parse_errors
            summary.rows_thrown_away += prepared.thrown_away
            summary.problems += prepared.problems[: MAX_KEPT_PROBLEMS - len(summary.problems)]
            if summary.parse_errors > limit:
                raise TooManyParseExceptions(summary.parse_errors, limit, summary.problems)
            if prepared.table.num_rows:
                pieces += write_pieces(prepared.table, rows_dir / f"file{i}-block{b}.arrow", i, b)
            progress.advance(block.progress_bytes, block.table.num_rows)
    if not pieces and not spec.allow_empty:
        raise nothing_to_ingest(summary)
    return pieces, dims


def _build(
    pieces: list[Piece],
    dims: list[DimensionSpec],
    spec: IngestionSpec,
    existing: Sequence[DataSegment],
    version: str,
    staging: Path,
) -> list[StagedSegment]:
    """Segments of every time chunk, built from the staged pieces a group of whole chunks at a time.

    Consecutive chunks go together up to `BUILD_BYTES / BUILD_WORKERS` of prepared rows (a larger
    chunk alone), as a Spark build task takes several: one build's writer threads then write
    several small segments side by side. Up to `BUILD_WORKERS` groups are built at once while
    together they hold at most `BUILD_BYTES`, so memory holds about that much whatever the input's
    size. A staged file is deleted once every chunk in it is built.
    """
    by_chunk: dict[int, list[Piece]] = {}
    users: dict[str, int] = {}
    for p in pieces:
        by_chunk.setdefault(p.chunk, []).append(p)
        users[p.path] = users.get(p.path, 0) + 1
    chunks = sorted(by_chunk)
    sizes = [sum(p.nbytes for p in by_chunk[c]) for c in chunks]
    groups = list(consecutive_runs(sizes, max(1, BUILD_BYTES // BUILD_WORKERS)))
    lock = threading.Lock()

    def build(g: int) -> list[StagedSegment]:
        lo, hi = groups[g]
        mine = [p for c in chunks[lo:hi] for p in by_chunk[c]]
        built = build_segments(read_pieces(mine, dims), dims, spec, existing, version, staging / f"group{g}")
        with lock:
            for p in mine:
                users[p.path] -= 1
                if not users[p.path]:
                    Path(p.path).unlink()
        return built

    futures: list[Future[list[StagedSegment]]] = []
    running: dict[Future[list[StagedSegment]], int] = {}
    with ThreadPoolExecutor(max_workers=BUILD_WORKERS) as pool:
        for g, (lo, hi) in enumerate(groups):
            size = sum(sizes[lo:hi])
            while running and (len(running) >= BUILD_WORKERS or sum(running.values()) + size > BUILD_BYTES):
                done, _ = wait(running, return_when=FIRST_COMPLETED)
                for f in done:
                    del running[f]
                    f.result()  # a failure stops the ingestion here
            future = pool.submit(build, g)
            futures.append(future)
            running[future] = size
        return [s for f in futures for s in f.result()]


def run_local(
    spec: IngestionSpec,
    deep: DeepStorage,
    store: MetadataStore,
    progress: Progress | None = None,
    *,
    s3: S3Settings = NO_S3,
) -> IngestionSummary:
    progress = progress or NoProgress()
    began = time.monotonic()
    check_granularity(spec)
    summary = IngestionSummary(spec.data_source, engine="local")
    staging = deep.staging_dir()
    try:
        inputs = InputStorage(staging / "inputs", s3, deep, store)
        pieces, dims = _stage(spec, summary, progress, staging / "rows", inputs)
        rows_in = sum(p.rows for p in pieces)
        existing = store.used_segments(spec.data_source)
        summary.version = new_version(existing)
        progress.phase("build")
        staged = _build(pieces, dims, spec, existing, summary.version, staging) if pieces else []
        summary.rows_ingested = sum(s.rows for s in staged)
        summary.rows_rolled_up = rows_in - summary.rows_ingested
        progress.phase("publish")
        summary.segments = publish_segments(
            deep, store, staged, overwrite=not spec.append, replace=replacement(spec)
        )
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    summary.seconds = time.monotonic() - began
    return summary
