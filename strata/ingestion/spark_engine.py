"""The Spark ingestion engine: the same spec, the same segments as the local engine, built on executors.

Two Spark stages over the local engine's own pieces:

1. read: one task per input split (`splits.split_inputs`, sized for the session's cores) reads,
   normalizes and buckets its rows (`prepare.prepare_block`) and writes each block's rows, sorted
   by time chunk, as an Arrow IPC file (one record batch run per chunk) into the job's staging
   directory in deep storage, which every executor must reach anyway. It returns only small stats
   (rows, bad rows with their lines, dimensions it discovered, where each chunk's rows are), so
   the driver checks maxParseExceptions, merges the discovered dimensions in input order and
   learns how many rows each time chunk holds before any segment is written.
2. build: every time chunk goes whole to one task (chunks spread over tasks by size); each task
   memory-maps its chunks' rows and runs `segment_build.build_segments` over them, exactly as the
   local engine does over all chunks, writing one Parquet file per partition into the staging
   directory. The rows travel between the stages through those files rather than Spark's shuffle:
   they are Arrow already, and a memory-mapped IPC file is read without copying or pickling
   (1M rows on 2 busy cores: 2.4 s against 2.9 s with `partitionBy` over pickled IPC batches).
   The staging area needs room for the prepared rows, uncompressed, until the publish.

The driver then moves the staged segments into place and publishes them in one transaction
(`segment_build.publish_segments`); on any failure it removes the staging directory and whatever
it had pushed, so nothing is ever half-published.

With deep storage on S3 (`deep.tasks_push`) executors share no filesystem: a read task uploads its
rows file under the bucket's staging prefix and a build task downloads the files it needs, builds
on its local disk and pushes its segments straight to S3 under keys of their own; the driver only
publishes them. Objects of a job that dies before its publish are named by no metadata row, and
`strata segments cleanup` removes them.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from strata.ingestion.errors import IngestionError, ParseProblem, TooManyParseExceptions
from strata.ingestion.fetch import NO_S3, InputStorage, S3Settings
from strata.ingestion.local_engine import check_granularity, nothing_to_ingest
from strata.ingestion.normalize import MAX_KEPT_PROBLEMS
from strata.ingestion.prepare import allowed_chunks, prepare_block
from strata.ingestion.readers import resolve_inputs
from strata.ingestion.segment_build import (
    StagedSegment,
    build_segments,
    new_version,
    publish_segments,
    push_staged,
    replacement,
)
from strata.ingestion.spark_gateway import gateway_without_preexec
from strata.ingestion.spec import DimensionSpec, IngestionSpec
from strata.ingestion.splits import InputSplit, read_split, split_inputs
from strata.ingestion.staged_rows import Piece, read_pieces, write_pieces
from strata.ingestion.summary import IngestionSummary, NoProgress, Progress
from strata.storage.deep_storage import DeepStorage
from strata.storage.metadata_store import MetadataStore
from strata.storage.s3_deep_storage import S3DeepStorage

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

LOCAL_JVM_OPTIONS = "-XX:TieredStopAtLevel=1"  # see session_defaults
LOCAL_WORKER_MALLOC = "glibc.malloc.hugetlb=1"  # see session_defaults


@dataclass
class SplitStats:
    """What reading one split found; small, collected on the driver."""

    split: int
    dimensions: list[DimensionSpec]
    pieces: list[Piece] = field(default_factory=list)
    rows_read: int = 0
    parse_errors: int = 0
    thrown_away: int = 0
    problems: list[ParseProblem] = field(default_factory=list)  # lines counted from the split's start
    lines: int = 0  # a byte-range split's line count


def spark_session(master: str | None = None, conf: Mapping[str, str] | None = None) -> SparkSession:
    """A session for one ingestion: local[*] by default, Python workers on this interpreter
    (PySpark takes them from PYSPARK_PYTHON, else `python3` on the PATH)."""
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    master = master or "local[*]"
    builder = SparkSession.builder.appName("strata ingest").master(master)
    if master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    for key, value in (session_defaults(master) | dict(conf or {})).items():
        builder = builder.config(key, value)
    with gateway_without_preexec():
        session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


def session_defaults(master: str) -> dict[str, str]:
    """Settings of a session started for one ingestion (`--spark-conf` overrides any of them).

    The command line draws its own progress: no console bars. In local mode: loopback only, no
    web UI, and the driver's JIT stops at its quick first tier (C1): the JVM only schedules the
    Python tasks and moves no rows (they travel through staging files), and the optimising C2
    compiler otherwise spends about a CPU-second of a 10M-row ingestion compiling Spark's own
    code, on the cores the Python tasks need. The Python workers' C allocator, which holds the
    ingestion's columns (`INGEST_POOL`), backs its large blocks with transparent huge pages
    (`GLIBC_TUNABLES=glibc.malloc.hugetlb=1`, unless the caller set GLIBC_TUNABLES, which the
    workers then inherit): gathering rows all over GB-sized columns otherwise pays a TLB miss and,
    in fresh memory, a page fault per 4 KiB (10M Parquet rows on 2 cores: about 13% less CPU).
    """
    out = {"spark.pyspark.python": os.environ.get("PYSPARK_PYTHON", sys.executable),
           "spark.ui.showConsoleProgress": "false"}  # fmt: skip
    if master.startswith("local"):
        out |= {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1",
                "spark.ui.enabled": "false", "spark.driver.extraJavaOptions": LOCAL_JVM_OPTIONS}  # fmt: skip
        if "GLIBC_TUNABLES" not in os.environ:
            out["spark.executorEnv.GLIBC_TUNABLES"] = LOCAL_WORKER_MALLOC
    return out


def run_spark(
    spec: IngestionSpec,
    deep: DeepStorage,
    store: MetadataStore,
    progress: Progress | None = None,
    *,
    spark: SparkSession | None = None,
    master: str | None = None,
    conf: Mapping[str, str] | None = None,
    s3: S3Settings = NO_S3,
) -> IngestionSummary:
    """Run the ingestion on `spark` (or on a session of its own, stopped afterwards). Remote
    inputs are fetched by the driver into a staging directory the executors read."""
    check_granularity(spec)
    progress = progress or NoProgress()
    fetched = deep.staging_dir()
    own = spark is None
    session: SparkSession | None = None
    try:
        files = resolve_inputs(spec.input_source, InputStorage(fetched / "inputs", s3, deep, store))
        session = spark if spark is not None else spark_session(master, conf)
        slots = max(1, session.sparkContext.defaultParallelism)
        splits = split_inputs(files, spec.input_format, slots=slots)
        progress.start(sum(s.file.size for s in splits))
        return _run(session, spec, splits, deep, store, progress)
    finally:
        if own and session is not None:
            session.stop()
        shutil.rmtree(fetched, ignore_errors=True)


def _run(
    spark: SparkSession,
    spec: IngestionSpec,
    splits: list[InputSplit],
    deep: DeepStorage,
    store: MetadataStore,
    progress: Progress,
) -> IngestionSummary:
    began = time.monotonic()
    summary = IngestionSummary(spec.data_source, engine="spark")
    sc = spark.sparkContext
    allowed = allowed_chunks(spec)
    job = deep.staging_dir()
    remote = _TaskStorage(deep, uuid.uuid4().hex) if isinstance(deep, S3DeepStorage) else None
    try:
        progress.phase("spark: read")
        stats: list[SplitStats] = _spark_call(
            lambda: (
                sc.parallelize(list(enumerate(splits)), len(splits))
                .map(lambda item: _read_split(item[0], item[1], spec, allowed, job, remote))
                .collect()
            )
        )
        stats.sort(key=lambda s: s.split)
        dims, chunk_rows = _merge_stats(spec, splits, stats, summary)
        progress.advance(sum(s.file.size for s in splits), summary.rows_read)
        existing = store.used_segments(spec.data_source)
        summary.version = new_version(existing)
        progress.phase("spark: build")
        staged = _spark_build(sc, stats, chunk_rows, spec, dims, existing, summary.version, job, remote)
        summary.rows_ingested = sum(s.rows for s in staged)
        summary.rows_rolled_up = sum(chunk_rows.values()) - summary.rows_ingested
        progress.phase("publish")
        staged.sort(key=lambda s: (s.segment.interval, s.segment.partition_num))
        summary.segments = publish_segments(
            deep, store, staged, overwrite=not spec.append, replace=replacement(spec)
        )
    finally:
        shutil.rmtree(job, ignore_errors=True)
        if remote is not None:
            remote.deep.drop_staging(remote.job)
    summary.seconds = time.monotonic() - began
    return summary


def _spark_build(
    sc: Any,
    stats: Sequence[SplitStats],
    chunk_rows: Mapping[int, int],
    spec: IngestionSpec,
    dims: list[DimensionSpec],
    existing: Sequence[Any],
    version: str,
    job: Path,
    remote: _TaskStorage | None,
) -> list[StagedSegment]:
    """Stage 2: every time chunk whole to one build task (none when there are no rows)."""
    if not chunk_rows:
        return []
    tasks = _assign_chunks(chunk_rows, max(1, sc.defaultParallelism))
    work: list[list[Piece]] = [[] for _ in range(max(tasks.values()) + 1)]
    for piece in (p for s in stats for p in s.pieces):
        work[tasks[piece.chunk]].append(piece)
    staged: list[StagedSegment] = _spark_call(
        lambda: (
            sc.parallelize(work, len(work))
            .mapPartitionsWithIndex(
                lambda i, lists: _build_task(
                    i, [p for ps in lists for p in ps], spec, dims, existing, version, job, remote
                )
            )
            .collect()
        )
    )
    return staged


def _merge_stats(
    spec: IngestionSpec, splits: Sequence[InputSplit], stats: Sequence[SplitStats], summary: IngestionSummary
) -> tuple[list[DimensionSpec], dict[int, int]]:
    """Totals and problems into `summary` (line numbers of byte-range splits made absolute); the
    dimensions in input order; rows per chunk."""
    dims = list(spec.dimensions.dimensions)
    chunk_rows: dict[int, int] = {}
    lines_before: dict[str, int] = {}
    for s in stats:
        dims += [d for d in s.dimensions if d not in dims]
        summary.rows_read += s.rows_read
        summary.parse_errors += s.parse_errors
        summary.rows_thrown_away += s.thrown_away
        problems = s.problems
        split = splits[s.split]
        if split.byte_range is not None:
            offset = lines_before.get(split.file.name, 0)
            problems = [ParseProblem(p.source, p.line + offset, p.message) for p in problems]
            lines_before[split.file.name] = offset + s.lines
        summary.problems += problems[: MAX_KEPT_PROBLEMS - len(summary.problems)]
        for p in s.pieces:
            chunk_rows[p.chunk] = chunk_rows.get(p.chunk, 0) + p.rows
    if summary.parse_errors > spec.tuning.max_parse_exceptions:
        raise TooManyParseExceptions(summary.parse_errors, spec.tuning.max_parse_exceptions, summary.problems)
    if not chunk_rows and not spec.allow_empty:
        raise nothing_to_ingest(summary)
    return dims, chunk_rows


def _assign_chunks(chunk_rows: Mapping[int, int], slots: int) -> dict[int, int]:
    """Chunk -> task, biggest chunks first onto the least loaded task (whole chunks per task)."""
    load = [0] * min(slots, len(chunk_rows))
    out: dict[int, int] = {}
    for chunk, n in sorted(chunk_rows.items(), key=lambda kv: (-kv[1], kv[0])):
        task = load.index(min(load))
        out[chunk] = task
        load[task] += n
    return out


def _spark_call(fn: Any) -> Any:
    """Run a Spark action; a failed job becomes an `IngestionError` with the task's own message."""
    try:
        return fn()
    except Exception as e:
        if type(e).__module__.startswith(("pyspark", "py4j")):
            raise IngestionError(f"the Spark job failed: {_task_message(str(e))}") from e
        raise


def _task_message(text: str) -> str:
    """The exception line of the last Python traceback in Spark's error text (the first
    unindented line after it), else the text's first line."""
    lines = text.splitlines()
    starts = [i for i, ln in enumerate(lines) if ln.startswith("Traceback (most recent call last)")]
    if starts:
        for ln in lines[starts[-1] + 1 :]:
            if ln.strip() and not ln.startswith((" ", "\t")):
                return ln.strip()
    return next((ln.strip() for ln in lines if ln.strip()), text)


@dataclass(frozen=True)
class _TaskStorage:
    """S3 deep storage as tasks use it: rows handed over through the job's staging prefix,
    segments pushed by the task that built them."""

    deep: S3DeepStorage
    job: str


# -- executor side ---------------------------------------------------------------------------------
def _read_split(
    index: int,
    split: InputSplit,
    spec: IngestionSpec,
    allowed: np.ndarray | None,
    job: Path,
    remote: _TaskStorage | None = None,
) -> SplitStats:
    """Stage 1 task: the split's prepared rows into IPC files (per block, sorted by chunk)."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    attempt = ctx.attemptNumber() if ctx is not None else 0
    if remote is not None:  # the executor's own disk, uploaded below
        local = Path(tempfile.mkdtemp(prefix="strata-rows-"))
        try:
            stats = _read_split(index, split, spec, allowed, local)
            stats.pieces = _upload_pieces(remote, stats.pieces)
            return stats
        finally:
            shutil.rmtree(local, ignore_errors=True)
    out = job / "rows"
    out.mkdir(parents=True, exist_ok=True)
    stats = SplitStats(index, list(spec.dimensions.dimensions))
    for b, block in enumerate(read_split(split, spec.input_format)):
        if split.byte_range is not None:  # the reader counts the range's lines as it goes
            stats.lines = block.end_line - 1
        prepared = prepare_block(block, spec, stats.dimensions, allowed)
        stats.dimensions = prepared.dimensions
        stats.rows_read += prepared.rows_read
        stats.parse_errors += prepared.parse_errors
        stats.thrown_away += prepared.thrown_away
        stats.problems += prepared.problems[: MAX_KEPT_PROBLEMS - len(stats.problems)]
        if prepared.table.num_rows:
            path = out / f"split{index}-block{b}-attempt{attempt}.arrow"
            stats.pieces += write_pieces(prepared.table, path, index, b)
    return stats


def _build_task(
    task: int,
    pieces: list[Piece],
    spec: IngestionSpec,
    dims: list[DimensionSpec],
    existing: Sequence[Any],
    version: str,
    job: Path,
    remote: _TaskStorage | None = None,
) -> Iterator[StagedSegment]:
    """Stage 2 task: the whole time chunks it was given -> staged segment files."""
    from pyspark import TaskContext

    if not pieces:
        return
    ctx = TaskContext.get()
    attempt = ctx.attemptNumber() if ctx is not None else 0
    if remote is not None:  # build on the executor's own disk, push from here
        local = Path(tempfile.mkdtemp(prefix="strata-build-"))
        try:
            parts = read_pieces(_download_pieces(remote, pieces, local), dims)
            staged = build_segments(parts, dims, spec, existing, version, local / f"task-{task}-{attempt}")
            yield from push_staged(remote.deep, staged)
        finally:
            shutil.rmtree(local, ignore_errors=True)
        return
    parts = read_pieces(pieces, dims)  # input order, as the local engine
    yield from build_segments(parts, dims, spec, existing, version, job / f"task-{task}-{attempt}")


def _upload_pieces(remote: _TaskStorage, pieces: list[Piece]) -> list[Piece]:
    """The pieces with their rows files uploaded to the job's staging prefix (named there)."""
    uploaded: dict[str, str] = {}
    for p in pieces:
        if p.path not in uploaded:
            uploaded[p.path] = remote.deep.put_staging(remote.job, Path(p.path))
    return [dataclasses.replace(p, path=uploaded[p.path]) for p in pieces]


def _download_pieces(remote: _TaskStorage, pieces: list[Piece], local: Path) -> list[Piece]:
    """The pieces with their rows files downloaded into `local` (each file once)."""
    fetched: dict[str, str] = {}
    for p in pieces:
        if p.path not in fetched:
            target = local / f"{len(fetched)}-{p.path.rsplit('/', 1)[-1]}"
            remote.deep.get_staging(p.path, target)
            fetched[p.path] = str(target)
    return [dataclasses.replace(p, path=fetched[p.path]) for p in pieces]
