"""The `compact` task: rewrite an interval's visible rows as new segments of a newer version, run by
strata.ingestion (locally or on Spark) over the segments' own files, and published in one
transaction that overshadows them all at once (a query sees the old segments or the new, never
both or neither: the historicals keep the old ones announced until the new ones are).

Appends are never lost (Druid's concurrent append and replace): a segment published into the
interval after the task read it (a batch append under an APPEND lock, a real-time handoff) is
upgraded in the same transaction: a copy of its descriptor, the same file, in the compacted
version's time chunk after its partitions, so it stays visible over the compacted data. The
transaction refuses to publish while a real-time node still builds an older-version segment in the
interval (strata.storage.pending_segments), and when an input was marked unused meanwhile; a task
killed before its publish publishes nothing.
"""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from strata.coordinator.compaction_input import CompactionInput, ingestion_spec, visible_inputs
from strata.coordinator.compaction_spec import CompactionSpec, parse_compaction
from strata.coordinator.index_task import GuardedStore, ingestion_failed
from strata.coordinator.task_context import TaskContext, TaskFailed
from strata.coordinator.task_status import ingestion_report
from strata.storage import open_deep_storage
from strata.storage.deep_storage import DeepStorage, LocalDeepStorage
from strata.storage.metadata_store import Replacement, TransactionGuard
from strata.storage.pending_segments import PendingSegments, used_overlapping
from strata.storage.segment_file import read_segment_facts
from timeline import DataSegment, Interval, ShardSpec

PUBLISH_ATTEMPTS = 5  # appends landing between the read and the publish: read again, up to this often


class InputsMoved(RuntimeError):
    """Segments were appended to the interval since the publish was planned: plan it again."""


def upgraded(appended: Sequence[DataSegment], compacted: Sequence[DataSegment]) -> list[DataSegment]:
    """Each appended segment as a partition of the compacted version's chunk holding it, after the
    compacted partitions (so the chunk's core set stays the compacted one); its file is shared."""
    chunks: dict[Interval, list[DataSegment]] = {}
    for s in compacted:
        chunks.setdefault(s.interval, []).append(s)
    version = compacted[0].version
    next_num = {iv: max(s.partition_num for s in segs) + 1 for iv, segs in chunks.items()}
    core = {iv: _core(segs) for iv, segs in chunks.items()}
    out = []
    for s in sorted(appended, key=lambda a: (a.interval.start, a.version, a.partition_num)):
        chunk = next((iv for iv in chunks if iv.contains(s.interval)), None)
        if chunk is None:
            if any(iv.overlaps(s.interval) for iv in chunks):
                raise TaskFailed(
                    f"segment [{s.id}] appended meanwhile spans more than one compacted time chunk; nothing "
                    "was published (compact with a segment granularity at least as coarse as the appends')"
                )
            continue  # no compacted data covers it: it stays visible as it is
        num = next_num[chunk]
        next_num[chunk] += 1
        shard = ShardSpec.from_json({"type": "numbered", "partitionNum": num, "partitions": core[chunk]})
        out.append(DataSegment(
            data_source=s.data_source, interval=chunk, version=version, load_spec=s.load_spec,
            dimensions=s.dimensions, metrics=s.metrics, shard_spec=shard, binary_version=s.binary_version,
            size=s.size, extra={"upgradedFromSegmentId": s.id},
        ))  # fmt: skip
    return out


def _core(segments: Sequence[DataSegment]) -> int:
    spec = segments[0].shard_spec
    return 1 if spec.type == "none" else int(spec.partitions or len(segments))


class CompactionStore(GuardedStore):
    """The task's metadata store: its publish records the compaction state, upgrades what was
    appended meanwhile, and checks in its transaction what it planned on."""

    def __init__(self, ctx: TaskContext, spec: CompactionSpec, inputs: Sequence[CompactionInput],
                 state: dict[str, Any]) -> None:  # fmt: skip
        super().__init__(ctx.metadata, ctx)
        self.spec, self.state = spec, state
        self.input_ids = {i.segment.id for i in inputs}
        self.pending = PendingSegments(ctx.metadata)
        self.upgraded: list[DataSegment] = []

    def publish(
        self,
        segments: Sequence[DataSegment],
        *,
        overwrite: bool,
        guard: TransactionGuard | None = None,
        replace: Replacement | None = None,
    ) -> None:
        if replace is not None:  # a compaction's spec never asks a REPLACE's drops
            raise ValueError("a compaction publishes no REPLACE drops")
        meta, ds = self._ctx.metadata, self.spec.data_source
        compacted = [
            dataclasses.replace(s, extra={**s.extra, "lastCompactionState": self.state}) for s in segments
        ]
        version = compacted[0].version
        for _ in range(PUBLISH_ATTEMPTS):
            now = [s for s in meta.used_segments(ds) if s.interval.overlaps(self.spec.interval)]
            appended = [s for s in now if s.id not in self.input_ids and s.version < version]
            extra = upgraded(appended, compacted)
            writes = [(s.data_source, s.interval) for s in [*compacted, *extra]]
            held = self._ctx.guard(writes, publishes=True)
            unchanged = self._unchanged({s.id for s in appended}, version)

            def checks(
                conn: Any, held: TransactionGuard = held, unchanged: TransactionGuard = unchanged
            ) -> None:
                unchanged(conn)
                held(conn)

            try:
                meta.publish([*compacted, *extra], overwrite=True, guard=checks)
            except InputsMoved:
                continue
            self.upgraded = extra
            return
        raise TaskFailed(f"segments kept being appended to {self.spec.interval} while publishing; "
                         "nothing was published")  # fmt: skip

    def _unchanged(self, appended: set[str], version: str) -> TransactionGuard:
        spec, dialect, pending = self.spec, self._ctx.metadata.dialect, self.pending

        def check(conn: Any) -> None:
            building = [
                p.id
                for p in pending.overlapping(spec.data_source, spec.interval, conn)
                if p.version < version
            ]
            if building:
                raise TaskFailed(f"real-time segments {building} are still being built in {spec.interval}; "
                                 "nothing was published (compact once they are handed off)")  # fmt: skip
            now = {s.id: s for s in used_overlapping(conn, dialect, spec.data_source, spec.interval)}
            gone = sorted(self.input_ids - set(now))
            if gone:
                raise TaskFailed(f"segments {gone} were marked unused or replaced while compacting; "
                                 "nothing was published")  # fmt: skip
            if {
                sid for sid, s in now.items() if sid not in self.input_ids and s.version < version
            } != appended:
                raise InputsMoved()

        return check


def _files(inputs: Sequence[CompactionInput], deep: DeepStorage, scratch: Path) -> list[str]:
    """The inputs' files: read in place from a local deep storage, else copied here first."""
    out = []
    for n, i in enumerate(inputs):
        path = i.segment.load_spec.get("path")
        if isinstance(deep, LocalDeepStorage) and isinstance(path, str) and Path(path).is_file():
            out.append(path)
        else:
            out.append(str(deep.pull(i.segment, scratch / str(n)) / "index.parquet"))
    return out


def run(ctx: TaskContext) -> dict[str, Any]:
    from strata.ingestion.api import ingest

    spec = parse_compaction(ctx.payload)
    inputs = visible_inputs(ctx.metadata.used_segments(spec.data_source), spec)
    if not inputs:
        message = f"There is no segment to compact in interval [{spec.interval}] of [{spec.data_source}]"
        raise TaskFailed(message, ingestion_report(ctx.task_id, "BUILD_SEGMENTS", {}, [], message))
    deep = open_deep_storage(ctx.deep_storage, s3_endpoint=ctx.s3_endpoint, s3_region=ctx.s3_region)
    scratch = deep.staging_dir()
    try:
        paths = _files(inputs, deep, scratch)
        parsed, state = ingestion_spec(spec, inputs, [read_segment_facts(p) for p in paths], paths)
        store = CompactionStore(ctx, spec, inputs, state)
        with ingestion_failed(ctx):
            summary = ingest(parsed, deep_storage=deep, metadata=store, engine=ctx.engine,
                             spark_master=ctx.spark_master, spark_conf=ctx.spark_conf)  # fmt: skip
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    stats = {"processed": summary.rows_read, "unparseable": 0, "thrownAway": 0}
    report = ingestion_report(
        ctx.task_id, "COMPLETED", stats, [], None, len(summary.segments) + len(store.upgraded)
    )
    report["ingestionStatsAndErrors"]["payload"]["compaction"] = {
        "engine": summary.engine,
        "inputSegments": sorted(i.segment.id for i in inputs),
        "upgradedSegments": [s.id for s in store.upgraded],
    }
    return report
