"""`df.write.format("strata")`: Spark tasks write segments, the driver publishes them all or none.

Each task prepares its batches exactly as `strata ingest` prepares a block of input
(`ingestion.prepare`), rolls up and cuts its rows into segments (`ingestion.segment_build`) and
writes them into a job directory under deep storage's staging area. Rollup is per task (Druid's
"best-effort" rollup: equal rows in different Spark partitions stay two rows; repartition by time
first for perfect rollup). Only `commit()`, run on the driver once every task has succeeded,
decides versions and partition numbers, moves the segments into place and publishes them in one
metadata transaction; `abort()` and any failure in `commit()` remove every file the job wrote.
With deep storage on S3 each task pushes its own segments (under keys of their own, not yet
published) and the driver only numbers and publishes them; an abort deletes them again.
"""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from strata.ingestion.block import Block
from strata.ingestion.errors import ParseProblem, TooManyParseExceptions
from strata.ingestion.normalize import MAX_KEPT_PROBLEMS
from strata.ingestion.partitioning import PartitionPlan
from strata.ingestion.prepare import allowed_chunks, prepare_block
from strata.ingestion.segment_build import (
    StagedSegment,
    build_segments,
    chunk_targets,
    discard,
    new_version,
    publish_segments,
    push_staged,
)
from strata.spark.write_options import option, spec_from_options
from strata.storage import (
    DEFAULT_DEEP_STORAGE,
    DEFAULT_METADATA,
    DeepStorage,
    open_deep_storage,
    open_metadata_store,
)
from timeline import DataSegment


@dataclass
class StrataCommitMessage(WriterCommitMessage):
    """What one task wrote (staged, unpublished) and what it read."""

    task: int
    staged: list[StagedSegment] = field(default_factory=list)
    rows_read: int = 0
    parse_errors: int = 0
    problems: list[ParseProblem] = field(default_factory=list)


class StrataWriter(DataSourceArrowWriter):
    """Built on the driver (options checked, nothing written yet), then pickled to every task."""

    def __init__(self, options: dict[str, str], schema: StructType, overwrite: bool):
        self.overwrite = overwrite
        self.spec = spec_from_options(options, schema, append=not overwrite)
        deep = option(options, "deepStorage", DEFAULT_DEEP_STORAGE) or DEFAULT_DEEP_STORAGE
        if "://" not in deep:
            deep = str(Path(deep).resolve())
        # fails here, before any task runs; pickled to the tasks (an S3 client is rebuilt in each)
        self.deep: DeepStorage = open_deep_storage(
            deep, s3_endpoint=option(options, "s3Endpoint"), s3_region=option(options, "s3Region")
        )
        self.metadata = str(option(options, "metadata", DEFAULT_METADATA))
        if "://" not in self.metadata:
            self.metadata = str(Path(self.metadata).resolve())
        open_metadata_store(self.metadata).close()  # fail here, before any task runs
        # the job's staging directory: shared by tasks and driver for a local deep storage, else
        # each task's own local directory (it pushes what it built)
        self.job = "" if self.deep.tasks_push else str(self.deep.staging_dir())

    # -- tasks ---------------------------------------------------------------------------------------
    def write(self, iterator: Iterator[pa.RecordBatch]) -> StrataCommitMessage:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        task, attempt = (ctx.partitionId(), ctx.attemptNumber()) if ctx is not None else (0, 0)
        spec, allowed = self.spec, allowed_chunks(self.spec)
        message = StrataCommitMessage(task)
        dims, parts, row = list(spec.dimensions.dimensions), [], 0
        for batch in iterator:
            block = Block(pa.Table.from_batches([batch]), f"Spark partition {task}", row + 1)
            row += batch.num_rows
            prepared = prepare_block(block, spec, dims, allowed)
            dims = prepared.dimensions  # grows only when `dimensions` was given empty (schemaless)
            message.rows_read += prepared.rows_read
            message.parse_errors += prepared.parse_errors
            message.problems += prepared.problems[: MAX_KEPT_PROBLEMS - len(message.problems)]
            if message.parse_errors > spec.tuning.max_parse_exceptions:
                raise TooManyParseExceptions(
                    message.parse_errors, spec.tuning.max_parse_exceptions, message.problems
                )
            if prepared.table.num_rows:
                parts.append(prepared.table)
        if not parts:
            return message
        local = "" if self.job else tempfile.mkdtemp(prefix="strata-spark-write-")
        try:
            staging = Path(self.job or local) / f"task-{task}-{attempt}"
            # version and partition numbers are the driver's to decide at commit: provisional here
            message.staged = build_segments(parts, dims, spec, [], "provisional", staging, final=False)
            if local:
                message.staged = push_staged(self.deep, message.staged)
        finally:
            if local:
                shutil.rmtree(local, ignore_errors=True)
        return message

    # -- driver --------------------------------------------------------------------------------------
    def commit(self, messages: Sequence[WriterCommitMessage | None]) -> None:
        try:
            done = [m for m in messages if isinstance(m, StrataCommitMessage)]
            errors = sum(m.parse_errors for m in done)
            if errors > self.spec.tuning.max_parse_exceptions:
                problems = [p for m in done for p in m.problems][:MAX_KEPT_PROBLEMS]
                raise TooManyParseExceptions(errors, self.spec.tuning.max_parse_exceptions, problems)
            staged = [s for m in sorted(done, key=lambda m: m.task) for s in m.staged]
            if not staged:
                return
            store = open_metadata_store(self.metadata)
            try:
                final = self._numbered(staged, store.used_segments(self.spec.data_source))
                publish_segments(self.deep, store, final, overwrite=self.overwrite)
            finally:
                store.close()
        except BaseException:
            self._discard(messages)  # publish_segments removed those it had; tasks' pushes too
            raise
        finally:
            self._drop_job()

    def abort(self, messages: Sequence[WriterCommitMessage | None]) -> None:
        self._discard(messages)
        self._drop_job()

    def _discard(self, messages: Sequence[WriterCommitMessage | None]) -> None:
        pushed = [
            s.segment for m in messages if isinstance(m, StrataCommitMessage) for s in m.staged if s.pushed
        ]
        discard(self.deep, pushed)

    def _drop_job(self) -> None:
        if self.job:
            shutil.rmtree(self.job, ignore_errors=True)

    def _numbered(self, staged: list[StagedSegment], existing: list[DataSegment]) -> list[StagedSegment]:
        """The final version and shard spec of every staged segment, chunk by chunk.

        Overwrite: a new version, partitions 0..n-1 of n. Append: the chunk's latest version,
        numbered after its existing partitions (or a new version where the chunk is empty).
        """
        version = new_version(existing)
        by_chunk: dict[int, list[StagedSegment]] = {}
        for s in staged:
            by_chunk.setdefault(s.segment.interval.start, []).append(s)
        targets = chunk_targets(self.spec, by_chunk, existing if not self.overwrite else [], version)
        out: list[StagedSegment] = []
        for start, segs in sorted(by_chunk.items()):
            _, chunk_version, first, core = targets[start]
            for i, s in enumerate(segs):
                plan = PartitionPlan(start, i, len(segs), np.empty(0, np.int64))
                seg = dataclasses.replace(
                    s.segment, version=chunk_version, shard_spec=plan.shard_spec(first, core)
                )
                out.append(dataclasses.replace(s, segment=seg))
        return out
