"""Auto-compaction (Druid's CompactSegments duty): every `--indexing-period`, for each data source with
a compaction config, find the time chunks whose visible segments are not yet compacted as the
config asks (real-time handoff's hourly segments above all) and submit `compact` tasks for the
newest of them, as many as the compaction task slots allow.

A chunk is a bucket of the config's segment granularity (without one, a segment's own interval),
widened to hold whole segments. It is skipped when it reaches into the latest
`skipOffsetFromLatest` of the data, when its segments hold more than `inputSegmentSizeBytes`, or
while a real-time node still builds a segment in it (strata.storage.pending_segments); it is
awaiting while a task holds a lock on it. `/compaction/status` reports each run's counts in
Druid's AutoCompactionSnapshot shape.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from strata.coordinator.compaction_config import (
    CONFIG_KEY,
    global_config,
    state_matches,
    task_capacity,
    tuning_of,
    wanted_state,
)
from strata.coordinator.task_types import Submission, accept
from strata.storage.config_store import ConfigStore
from strata.storage.metadata_store import MetadataStore
from strata.storage.pending_segments import PendingSegments
from strata.storage.task_store import TaskStore
from timeline import (
    ETERNITY,
    DataSegment,
    Granularity,
    Interval,
    OverlappingSameVersionError,
    Period,
    VersionedIntervalTimeline,
)

log = logging.getLogger("strata.coordinator")

ID_PREFIX = "coordinator-issued"  # Druid's prefix for the compact tasks its coordinator submits


@dataclass
class Chunk:
    interval: Interval
    segments: list[DataSegment] = field(default_factory=list)

    @property
    def size(self) -> int:
        return sum(s.size for s in self.segments)


@dataclass
class Plan:
    """One data source's chunks by what auto-compaction does with them; `due` newest first."""

    due: list[Chunk] = field(default_factory=list)
    running: list[Chunk] = field(default_factory=list)  # locked by a task now: awaiting, not submitted
    compacted: list[Chunk] = field(default_factory=list)
    skipped: list[Chunk] = field(default_factory=list)

    def snapshot(self, ds: str) -> dict[str, Any]:
        """Druid's AutoCompactionSnapshot."""
        awaiting = self.due + self.running
        out: dict[str, Any] = {"dataSource": ds, "scheduleStatus": "RUNNING"}
        for name, chunks in (("AwaitingCompaction", awaiting), ("Compacted", self.compacted),
                             ("Skipped", self.skipped)):  # fmt: skip
            out[f"bytes{name}"] = sum(c.size for c in chunks)
            out[f"segmentCount{name}"] = sum(len(c.segments) for c in chunks)
            out[f"intervalCount{name}"] = len(chunks)
        return out


def visible_segments(used: Sequence[DataSegment]) -> list[DataSegment]:
    """The segments queries read: complete partition sets no newer version overshadows."""
    timeline: VersionedIntervalTimeline[DataSegment] = VersionedIntervalTimeline()
    for s in used:
        if s.shard_spec.has_data:
            try:
                timeline.add_segment(s, s)
            except OverlappingSameVersionError:
                continue
    return sorted(
        timeline.find_non_overshadowed_objects(ETERNITY), key=lambda s: (s.interval, s.partition_num)
    )


def chunks_of(segments: Sequence[DataSegment], granularity: Granularity | None) -> list[Chunk]:
    """Segments grouped by time chunk (the granularity's buckets, widened to whole segments)."""
    spans = []
    for s in segments:
        if granularity is None:
            spans.append((s.interval, s))
        else:
            end = granularity.bucket_end(granularity.bucket_start(s.interval.end - 1))
            spans.append((Interval(granularity.bucket_start(s.interval.start), end), s))
    chunks: list[Chunk] = []
    for interval, s in sorted(spans, key=lambda p: (p[0].start, p[0].end)):
        if chunks and chunks[-1].interval.overlaps(interval):
            prev = chunks[-1]
            prev.interval = Interval(prev.interval.start, max(prev.interval.end, interval.end))
            prev.segments.append(s)
        else:
            chunks.append(Chunk(interval, [s]))
    return chunks


def plan(
    config: Mapping[str, Any],
    used: Sequence[DataSegment],
    locked: Sequence[Interval],
    pending: Sequence[Interval],
) -> Plan:
    """What auto-compaction does with one data source's chunks now."""
    gran = (config.get("granularitySpec") or {}).get("segmentGranularity")
    granularity = None if gran is None else Granularity.parse(gran)
    segments = visible_segments(used)
    out = Plan()
    if not segments:
        return out
    latest = max(s.interval.end for s in segments)
    skip_from = Period.parse(str(config["skipOffsetFromLatest"])).add_to(latest, times=-1)
    if granularity is not None:  # Druid aligns the skipped stretch to the granularity's buckets
        skip_from = granularity.bucket_start(skip_from)
    wanted = wanted_state(config)
    for chunk in chunks_of(segments, granularity):
        whole = granularity is None or all(s.interval == chunk.interval for s in chunk.segments)
        done = whole and all(
            state_matches(s.extra.get("lastCompactionState"), wanted) for s in chunk.segments
        )
        if done:
            out.compacted.append(chunk)
        elif (
            chunk.interval.end > skip_from  # the latest data: still being appended to
            or chunk.size > int(config["inputSegmentSizeBytes"])
            or any(p.overlaps(chunk.interval) for p in pending)  # a real-time node builds a segment there
        ):
            out.skipped.append(chunk)
        elif any(lk.overlaps(chunk.interval) for lk in locked):
            out.running.append(chunk)
        else:
            out.due.append(chunk)
    out.due.sort(key=lambda c: c.interval.start, reverse=True)  # Druid compacts the newest first
    return out


def task_body(config: Mapping[str, Any], interval: Interval) -> dict[str, Any]:
    """The compact task Druid's coordinator submits for one chunk."""
    ds = config["dataSource"]
    body: dict[str, Any] = {
        "type": "compact",
        "dataSource": ds,
        "ioConfig": {"type": "compact", "inputSpec": {"type": "interval", "interval": str(interval)}},
        "tuningConfig": tuning_of(config),
        "context": {**(config.get("taskContext") or {}), "priority": config["taskPriority"]},
    }
    for key in ("granularitySpec", "dimensionsSpec", "metricsSpec"):
        if config.get(key) is not None:
            body[key] = config[key]
    return body


class Queue(Protocol):
    @property
    def slots(self) -> int: ...

    def submit(self, submission: Submission) -> None: ...


class CompactionOwner(Protocol):
    """What the duty needs of the coordinator."""

    configs: ConfigStore
    tasks: TaskStore
    metadata: MetadataStore
    queue: Queue
    compaction_status: dict[str, dict[str, Any]]


def compact_segments(coordinator: CompactionOwner) -> None:
    """The duty: plan every configured data source, submit what the free compaction slots allow."""
    document = global_config(coordinator.configs.get(CONFIG_KEY))
    configs = {c["dataSource"]: c for c in document["compactionConfigs"]}
    if not configs:
        coordinator.compaction_status = {}
        return
    active = coordinator.tasks.tasks(active=True)
    free = task_capacity(document, coordinator.queue.slots) - sum(1 for t in active if t.type == "compact")
    locks = coordinator.tasks.locks()
    pending = PendingSegments(coordinator.metadata)
    statuses: dict[str, dict[str, Any]] = {}
    now = int(time.time() * 1000)  # the tasks' creation time
    for ds, config in sorted(configs.items()):
        held = [lk.interval for lk in locks if lk.data_source == ds]
        building = [p.interval for p in pending.overlapping(ds, ETERNITY)]
        found = plan(config, coordinator.metadata.used_segments(ds), held, building)
        while found.due and free > 0:
            chunk = found.due.pop(0)
            body = task_body(config, chunk.interval)
            generated = accept(body, now).id  # Druid's id, prefixed as its coordinator's are
            submission = accept({**body, "id": f"{ID_PREFIX}_{generated}"}, now)
            coordinator.queue.submit(submission)
            log.info("auto-compaction: %s submitted for %s of %s (%d segments)",
                     submission.id, chunk.interval, ds, len(chunk.segments))  # fmt: skip
            found.running.append(chunk)
            free -= 1
        statuses[ds] = found.snapshot(ds)
    coordinator.compaction_status = statuses
