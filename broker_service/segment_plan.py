"""Which segments a query reads: timeline lookup per query interval, descriptors clipped as Druid does."""

from __future__ import annotations

import hashlib
import struct
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from broker_service.server_view import BrokerServerView, ServerSelector
from strata.query import Query
from strata.query.segment_spec import SegmentsSpec
from timeline import Interval, SegmentDescriptor, VersionedIntervalTimeline

T = TypeVar("T")


class SegmentTask:
    """One segment to read: its selector and the descriptor (interval clipped to the query).
    Read-only by convention, equal by value; a plain slotted class, not a frozen dataclass:
    routing makes one per segment of every query, and a frozen dataclass's field-by-field
    setattr took as long as the rest of making it."""

    __slots__ = ("_prefix", "descriptor", "selector")

    def __init__(self, selector: ServerSelector, descriptor: SegmentDescriptor):
        self.selector = selector
        self.descriptor = descriptor
        self._prefix: bytes | None = None

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SegmentTask):
            return NotImplemented
        return self.selector is other.selector and self.descriptor == other.descriptor

    def __hash__(self) -> int:
        return hash((id(self.selector), self.descriptor))

    def __repr__(self) -> str:
        return f"SegmentTask(selector={self.selector!r}, descriptor={self.descriptor!r})"

    @property
    def cache_key_prefix(self) -> bytes:
        """Druid's per-segment cache key starts with the clipped interval, version and partition.
        Built when first asked (a broker without a cache never asks, and routing a query makes a
        task per segment) and kept, since a reused plan serves every repeat of a query."""
        prefix = self._prefix
        if prefix is None:
            d = self.descriptor
            prefix = struct.pack(">qq", d.interval.start, d.interval.end) + d.version.encode()
            prefix += struct.pack(">i", d.partition)
            self._prefix = prefix
        return prefix

    @property
    def segment_id(self) -> str:
        return self.selector.segment.id


@dataclass(frozen=True, slots=True)
class SegmentPlan:
    tasks: tuple[SegmentTask, ...]
    uncovered: tuple[Interval, ...] = ()
    uncovered_overflowed: bool = False
    _digest: str | None = field(default=None, init=False, repr=False, compare=False)
    _per_view: tuple[int, object] | None = field(default=None, init=False, repr=False, compare=False)

    def per_view_version(self, version: int, compute: Callable[[], T]) -> T:
        """`compute()`, kept while the server view's `version` stands: a plan is reused by every
        repeat of a query, and what its segments' servers announced changes only with the view
        (broker_service.metadata_answers splits a count's segments by it). One value per plan."""
        kept = self._per_view
        if kept is not None and kept[0] == version:
            return kept[1]  # type: ignore[return-value]
        value = compute()
        object.__setattr__(self, "_per_view", (version, value))
        return value

    def segments_digest(self) -> str:
        """Names exactly the segment pieces read (ids and clipped intervals), in any order: the
        whole-answer cache's ETag. Built once, since a plan is reused while its timeline holds."""
        if self._digest is None:
            digest = hashlib.blake2b(digest_size=16)
            for task in sorted(self.tasks, key=lambda t: t.segment_id):
                d = task.descriptor
                digest.update(task.segment_id.encode())
                digest.update(struct.pack(">qq", d.interval.start, d.interval.end))
            object.__setattr__(self, "_digest", f'"{digest.hexdigest()}"')
        assert self._digest is not None
        return self._digest


class SegmentPlanner:
    """Plans reused while their datasource's timeline is unchanged: dashboards repeat the same
    intervals, and looking up 10,000 segments costs tens of milliseconds on the event loop."""

    def __init__(self, view: BrokerServerView, size: int = 256):
        self.view = view
        self.size = size
        self._plans: OrderedDict[tuple[object, ...], SegmentPlan] = OrderedDict()

    def plan(self, query: Query) -> SegmentPlan:
        timeline = self.view.timeline(query.data_source)
        if timeline is None or isinstance(query.segment_spec, SegmentsSpec):
            return plan_segments(self.view, query)
        limit = query.context.uncovered_intervals_limit
        key = (query.data_source, timeline.generation, query.segment_spec.intervals, limit)
        plan = self._plans.get(key)
        if plan is not None:
            self._plans.move_to_end(key)
            return plan
        plan = self._plans[key] = plan_segments(self.view, query)
        if len(self._plans) > self.size:
            self._plans.popitem(last=False)
        return plan


def plan_segments(view: BrokerServerView, query: Query) -> SegmentPlan:
    timeline = view.timeline(query.data_source)
    if timeline is None:
        intervals = query.segment_spec.intervals
        return _with_uncovered(SegmentPlan(()), list(intervals), query.context.uncovered_intervals_limit)
    if isinstance(query.segment_spec, SegmentsSpec):
        return SegmentPlan(tuple(_specific(timeline, query.segment_spec)))
    tasks: list[SegmentTask] = []
    uncovered: list[Interval] = []
    want_uncovered = query.context.uncovered_intervals_limit > 0
    for interval in query.segment_spec.intervals:
        holders = timeline.lookup(interval)
        cursor = interval.start
        for holder in holders:
            if want_uncovered and holder.interval.start > cursor:
                uncovered.append(Interval(cursor, holder.interval.start))
            cursor = max(cursor, holder.interval.end)
            for chunk in holder.chunks:
                selector = chunk.object
                if not selector.segment.shard_spec.has_data:
                    continue  # tombstones cover time without data
                descriptor = SegmentDescriptor(holder.interval, holder.version, chunk.chunk_number)
                tasks.append(SegmentTask(selector, descriptor))
        if want_uncovered and cursor < interval.end:
            uncovered.append(Interval(cursor, interval.end))
    return _with_uncovered(SegmentPlan(tuple(tasks)), uncovered, query.context.uncovered_intervals_limit)


def _specific(timeline: VersionedIntervalTimeline[ServerSelector], spec: SegmentsSpec) -> list[SegmentTask]:
    """A query naming exact segments (Druid's MultipleSpecificSegmentSpec): incomplete sets allowed."""
    tasks = []
    for descriptor in spec.descriptors:
        for holder in timeline.lookup_with_incomplete_partitions(descriptor.interval):
            if holder.version != descriptor.version:
                continue
            for chunk in holder.chunks:
                if chunk.chunk_number == descriptor.partition:
                    tasks.append(SegmentTask(chunk.object, descriptor))
                    break
            break
    return tasks


def _with_uncovered(plan: SegmentPlan, uncovered: list[Interval], limit: int) -> SegmentPlan:
    if limit <= 0:
        return plan
    return SegmentPlan(plan.tasks, tuple(uncovered[:limit]), len(uncovered) > limit)
