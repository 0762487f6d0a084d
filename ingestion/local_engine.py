"""The local ingestion engine: read -> normalize -> rollup/sort -> partition -> write -> push -> publish.

Crash safety: segments are written in a staging directory inside deep storage, moved into place
only once all of them are built, and published in one metadata transaction last. Any failure or
interrupt before the publish deletes what was pushed, so nothing half-done is ever served.
"""

from __future__ import annotations

import shutil
import time

import pyarrow as pa

from ingestion.errors import IngestionError, SpecError, TooManyParseExceptions
from ingestion.normalize import MAX_KEPT_PROBLEMS
from ingestion.prepare import allowed_chunks, prepare_block
from ingestion.readers import read_blocks, resolve_inputs
from ingestion.segment_build import build_segments, new_version, publish_segments
from ingestion.spec import DimensionSpec, IngestionSpec
from ingestion.summary import IngestionSummary, NoProgress, Progress
from storage.deep_storage import LocalDeepStorage
from storage.metadata_store import MetadataStore

__all__ = ["check_granularity", "new_version", "run_local"]


def check_granularity(spec: IngestionSpec) -> None:
    if spec.granularity.segment.is_none:
        raise SpecError("segmentGranularity 'none' would make a segment per millisecond; choose e.g. 'hour'")


def nothing_to_ingest(summary: IngestionSummary) -> IngestionError:
    return IngestionError(
        f"nothing to ingest: {summary.rows_read} rows read, {summary.parse_errors} unparseable, "
        f"{summary.rows_thrown_away} outside granularitySpec.intervals"
    )


def _read(
    spec: IngestionSpec, summary: IngestionSummary, progress: Progress
) -> tuple[list[pa.Table], list[DimensionSpec]]:
    files = resolve_inputs(spec.input_source)
    progress.start(sum(f.size for f in files))
    allowed = allowed_chunks(spec)
    dims = list(spec.dimensions.dimensions)
    limit = spec.tuning.max_parse_exceptions
    parts: list[pa.Table] = []
    for f in files:
        for block in read_blocks(f, spec.input_format):
            prepared = prepare_block(block, spec, dims, allowed)
            dims = prepared.dimensions
            summary.rows_read += prepared.rows_read
            summary.parse_errors += prepared.parse_errors
            summary.rows_thrown_away += prepared.thrown_away
            summary.problems += prepared.problems[: MAX_KEPT_PROBLEMS - len(summary.problems)]
            if summary.parse_errors > limit:
                raise TooManyParseExceptions(summary.parse_errors, limit, summary.problems)
            parts.append(prepared.table)
            progress.advance(block.progress_bytes, block.table.num_rows)
    if not parts or not sum(p.num_rows for p in parts):
        raise nothing_to_ingest(summary)
    return parts, dims


def run_local(
    spec: IngestionSpec, deep: LocalDeepStorage, store: MetadataStore, progress: Progress | None = None
) -> IngestionSummary:
    progress = progress or NoProgress()
    began = time.monotonic()
    check_granularity(spec)
    summary = IngestionSummary(spec.data_source, engine="local")
    parts, dims = _read(spec, summary, progress)
    rows_in = sum(p.num_rows for p in parts)
    existing = store.used_segments(spec.data_source)
    summary.version = new_version(existing)
    staging = deep.staging_dir()
    try:
        staged = build_segments(parts, dims, spec, existing, summary.version, staging, progress)
        summary.rows_ingested = sum(s.rows for s in staged)
        summary.rows_rolled_up = rows_in - summary.rows_ingested
        progress.phase("publish")
        summary.segments = publish_segments(deep, store, staged, overwrite=not spec.append)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    summary.seconds = time.monotonic() - began
    return summary
