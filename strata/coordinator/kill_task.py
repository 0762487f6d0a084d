"""The `kill` task: delete a data source's unused segments whose intervals lie inside the task's
interval (optionally only some `versions`, at most `limit`), rows first, then files, `batchSize` at
a time.

Each batch's rows go in one transaction guarded by the task's lock, and only rows still unused at
that moment: a segment marked used again meanwhile keeps its row and its file. Files are deleted
only for rows that went and only when no other row names them (a compaction's upgraded copy of an
appended segment shares its file), so a used segment never loses its file; a failure between the two leaves
files no row names, which `strata segments cleanup` finds. With `markAsUnused` (deprecated in
Druid, kept for its scripts) the interval's used segments are first marked unused.
"""

from __future__ import annotations

from typing import Any

from strata.coordinator.task_context import TaskContext
from strata.coordinator.task_status import kill_report
from strata.storage import open_deep_storage
from timeline import DataSegment, Interval

DEFAULT_BATCH_SIZE = 100  # Druid's kill batchSize default


def _interval(payload: dict[str, Any]) -> Interval:
    text = str(payload["interval"])
    return Interval.parse(text if "/" in text else text.replace("_", "/"))


def run(ctx: TaskContext) -> dict[str, Any]:
    body = ctx.payload
    ds, interval = str(body["dataSource"]), _interval(body)
    versions = set(body["versions"]) if body.get("versions") is not None else None
    limit, batch_size = body.get("limit"), int(body.get("batchSize") or DEFAULT_BATCH_SIZE)
    meta = ctx.metadata
    marked = 0
    if body.get("markAsUnused"):
        used = [s for s in meta.used_segments(ds) if interval.contains(s.interval)]
        marked = meta.mark_unused([s.id for s in used if versions is None or s.version in versions])
    candidates = sorted(
        (r.segment for r in meta.segments(ds, include_unused=True)
         if not r.used and interval.contains(r.segment.interval)
         and (versions is None or r.segment.version in versions)),
        key=lambda s: (s.interval.start, s.interval.end, s.version, s.partition_num),
    )  # fmt: skip
    if limit is not None:
        candidates = candidates[: int(limit)]
    deep = open_deep_storage(ctx.deep_storage, s3_endpoint=ctx.s3_endpoint, s3_region=ctx.s3_region)
    killed = batches = 0
    for start in range(0, len(candidates), batch_size):
        batch = candidates[start : start + batch_size]
        killed += _kill_batch(ctx, deep, ds, interval, batch)
        batches += 1
    return kill_report(ctx.task_id, killed, batches, marked)


def _kill_batch(ctx: TaskContext, deep: Any, ds: str, interval: Interval, batch: list[DataSegment]) -> int:
    meta = ctx.metadata
    ids = [s.id for s in batch]
    meta.delete_unused(ids, guard=ctx.guard([(ds, interval)], publishes=False))
    remaining = [r.segment for r in meta.segments(ds, include_unused=True)]
    left = {s.id for s in remaining} & set(ids)
    gone = [s for s in batch if s.id not in left]
    # a compaction's upgraded copy of an appended segment shares its file: keep what a row still names
    shared = {deep.location_of(s) for s in remaining if s.load_spec}
    for segment in gone:
        if deep.location_of(segment) not in shared:
            deep.delete(segment)
    return len(gone)
