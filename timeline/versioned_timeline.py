"""Druid's VersionedIntervalTimeline: which (interval, version, partitions) are visible.

Every added (interval, version) is kept; two "visible" maps hold non-overlapping pieces of the
newest version at each instant: one built from complete partition sets only (what queries use),
one from any set (for queries that name exact segments). Both are sorted lists of pieces, so a
lookup is a bisect plus the pieces it returns: O(log n + k).

Not thread-safe by design: the broker mutates and reads timelines only on its event-loop thread,
so a query always sees a consistent state without locks.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Generic, NamedTuple, TypeVar

from timeline.interval import Interval
from timeline.partition_holder import PartitionHolder
from timeline.shard_spec import PartitionChunk

if TYPE_CHECKING:
    from timeline.segment import DataSegment

T = TypeVar("T")

# one counter for every timeline: a generation is never reused, even by a timeline made later
_GENERATIONS = itertools.count(1)


class OverlappingSameVersionError(ValueError):
    """Two different entries with the same version cover overlapping intervals."""


class _Entry(Generic[T]):
    __slots__ = ("holder", "true_interval", "version")

    def __init__(self, true_interval: Interval, version: str):
        self.true_interval = true_interval
        self.version = version
        self.holder: PartitionHolder[T] = PartitionHolder()


class TimelineObjectHolder(NamedTuple, Generic[T]):
    """A named tuple, not a frozen dataclass: a lookup makes one per visible piece, and a frozen
    dataclass's field-by-field setattr made them most of a one-day lookup's time."""

    interval: Interval  # the visible piece, clipped to the lookup for the first and last holder
    true_interval: Interval
    version: str
    chunks: tuple[PartitionChunk[T], ...]

    @property
    def objects(self) -> list[T]:
        return [c.object for c in self.chunks]


class _Visible(Generic[T]):
    """Non-overlapping pieces sorted by start: parallel lists for bisect."""

    __slots__ = ("entries", "keys", "starts")

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.keys: list[Interval] = []
        self.entries: list[_Entry[T]] = []

    def get(self, key: Interval) -> _Entry[T] | None:
        i = bisect.bisect_left(self.starts, key.start)
        if i < len(self.keys) and self.keys[i] == key:
            return self.entries[i]
        return None

    def put(self, key: Interval, entry: _Entry[T]) -> None:
        if key.end <= key.start:
            return
        i = bisect.bisect_left(self.starts, key.start)
        if i < len(self.keys) and self.keys[i] == key:
            self.entries[i] = entry
            return
        self.starts.insert(i, key.start)
        self.keys.insert(i, key)
        self.entries.insert(i, entry)

    def pop(self, key: Interval) -> _Entry[T] | None:
        i = bisect.bisect_left(self.starts, key.start)
        if i < len(self.keys) and self.keys[i] == key:
            del self.starts[i], self.keys[i]
            return self.entries.pop(i)
        return None

    def lower_key(self, key: Interval) -> Interval | None:
        """Greatest key ordered before `key` (by start, then end); keys have distinct starts."""
        i = bisect.bisect_left(self.starts, key.start)
        if i < len(self.keys) and self.keys[i].start == key.start and self.keys[i] < key:
            return self.keys[i]
        return self.keys[i - 1] if i > 0 else None

    def higher_key(self, key: Interval) -> Interval | None:
        i = bisect.bisect_left(self.starts, key.start)
        if i < len(self.keys) and self.keys[i].start == key.start and self.keys[i] <= key:
            i += 1
        return self.keys[i] if i < len(self.keys) else None

    def overlapping(self, interval: Interval) -> range:
        """Indexes of pieces overlapping `interval` (pieces are disjoint and sorted)."""
        lo = bisect.bisect_right(self.starts, interval.start) - 1
        if lo < 0 or self.keys[lo].end <= interval.start:
            lo += 1
        hi = bisect.bisect_left(self.starts, interval.end)
        return range(lo, hi)


class VersionedIntervalTimeline(Generic[T]):
    def __init__(self) -> None:
        self._all: dict[Interval, dict[str, _Entry[T]]] = {}
        # true intervals sorted by start, for overlap queries over every stored entry
        self._all_starts: list[int] = []
        self._all_keys: list[Interval] = []
        self._max_duration = 0
        self._complete: _Visible[T] = _Visible()
        self._incomplete: _Visible[T] = _Visible()
        # changes on every add and remove: what was looked up at one generation holds until the next
        self.generation = next(_GENERATIONS)

    # -- mutation -------------------------------------------------------------------------------------
    def add(self, interval: Interval, version: str, chunk: PartitionChunk[T]) -> None:
        self.generation = next(_GENERATIONS)
        versions = self._all.get(interval)
        if versions is None:
            versions = self._all[interval] = {}
            i = bisect.bisect_left(self._all_starts, interval.start)
            while i < len(self._all_keys) and self._all_keys[i] < interval:
                i += 1
            self._all_starts.insert(i, interval.start)
            self._all_keys.insert(i, interval)
            self._max_duration = max(self._max_duration, interval.duration_ms)
        entry = versions.get(version)
        if entry is None:
            entry = versions[version] = _Entry(interval, version)
        if not entry.holder.add(chunk):
            return  # duplicate chunk number: ignored, as Druid does
        if entry.holder.is_complete():
            self._add_visible(self._complete, interval, entry)
        self._add_visible(self._incomplete, interval, entry)

    def add_all(self, items: Iterable[tuple[Interval, str, PartitionChunk[T]]]) -> None:
        for interval, version, chunk in items:
            self.add(interval, version, chunk)

    def add_segment(self, segment: DataSegment, obj: T) -> None:
        self.add(segment.interval, segment.version, segment.shard_spec.create_chunk(obj))

    def remove_segment(self, segment: DataSegment, obj: T) -> PartitionChunk[T] | None:
        return self.remove(segment.interval, segment.version, segment.shard_spec.create_chunk(obj))

    def remove(self, interval: Interval, version: str, chunk: PartitionChunk[T]) -> PartitionChunk[T] | None:
        self.generation = next(_GENERATIONS)
        versions = self._all.get(interval)
        entry = versions.get(version) if versions else None
        if entry is None or versions is None:
            return None
        removed = entry.holder.remove(chunk)
        if removed is None:
            return None
        if entry.holder.is_empty():
            del versions[version]
            if not versions:
                del self._all[interval]
                i = bisect.bisect_left(self._all_starts, interval.start)
                while self._all_keys[i] != interval:
                    i += 1
                del self._all_starts[i], self._all_keys[i]
            self._remove_visible(self._incomplete, entry, incomplete_ok=True)
        self._remove_visible(self._complete, entry, incomplete_ok=False)
        return removed

    # -- queries --------------------------------------------------------------------------------------
    def lookup(self, interval: Interval) -> list[TimelineObjectHolder[T]]:
        """Visible complete partition sets overlapping `interval`; first/last clipped to it."""
        return self._lookup(self._complete, interval)

    def lookup_with_incomplete_partitions(self, interval: Interval) -> list[TimelineObjectHolder[T]]:
        return self._lookup(self._incomplete, interval)

    def find_chunk(self, interval: Interval, version: str, partition_num: int) -> PartitionChunk[T] | None:
        versions = self._all.get(interval)
        if versions and version in versions:
            return versions[version].holder.get(partition_num)
        for key in self._stored_overlapping(interval):
            if key.contains(interval):
                entry = self._all[key].get(version)
                if entry is not None:
                    return entry.holder.get(partition_num)
        return None

    def find_non_overshadowed_objects(self, interval: Interval, incomplete_ok: bool = False) -> set[T]:
        holders = self.lookup_with_incomplete_partitions(interval) if incomplete_ok else self.lookup(interval)
        return {c.object for h in holders for c in h.chunks}

    def is_overshadowed(self, interval: Interval, version: str, obj: T | None = None) -> bool:
        """True if complete, strictly newer versions cover all of `interval`."""
        visible = self._complete
        exact = visible.get(interval)
        if exact is not None:
            return version < exact.version
        i = bisect.bisect_right(visible.starts, interval.start) - 1
        if i < 0 or not visible.keys[i].overlaps(interval):
            return False
        prev_end: int | None = None
        while True:
            if i >= len(visible.keys):
                return False
            key = visible.keys[i]
            if prev_end is not None and key.start > prev_end:
                return False
            if version >= visible.entries[i].version:
                return False
            prev_end = key.end
            if interval.end <= prev_end:
                return True
            i += 1

    def find_fully_overshadowed(self) -> list[TimelineObjectHolder[T]]:
        """Stored (interval, version) sets visible in neither map: safe to drop."""
        visible = {id(e) for e in self._complete.entries} | {id(e) for e in self._incomplete.entries}
        out = []
        for key in self._all_keys:
            for entry in self._all[key].values():
                if id(entry) not in visible:
                    out.append(TimelineObjectHolder(key, key, entry.version, entry.holder.chunks()))
        return out

    def iterate_all_objects(self) -> Iterator[T]:
        for versions in self._all.values():
            for entry in versions.values():
                for chunk in entry.holder:
                    yield chunk.object

    def is_empty(self) -> bool:
        return not self._all

    def __len__(self) -> int:
        """Number of stored chunks."""
        return sum(len(e.holder) for v in self._all.values() for e in v.values())

    # -- internals ------------------------------------------------------------------------------------
    def _lookup(self, visible: _Visible[T], interval: Interval) -> list[TimelineObjectHolder[T]]:
        if interval.start >= interval.end:
            return []
        idx = visible.overlapping(interval)
        lo, hi = idx.start, idx.stop
        out = [
            TimelineObjectHolder(key, e.true_interval, e.version, e.holder.chunks())
            for key, e in zip(visible.keys[lo:hi], visible.entries[lo:hi], strict=True)
        ]
        if out:
            first, last = out[0], out[-1]
            if interval.start > first.interval.start:
                out[0] = first = TimelineObjectHolder(
                    Interval(interval.start, first.interval.end),
                    first.true_interval,
                    first.version,
                    first.chunks,
                )
            if interval.end < last.interval.end:
                last = out[-1]
                out[-1] = TimelineObjectHolder(
                    Interval(last.interval.start, interval.end), last.true_interval, last.version, last.chunks
                )
        return out

    def _stored_overlapping(self, interval: Interval) -> list[Interval]:
        lo = bisect.bisect_right(self._all_starts, interval.start - self._max_duration)
        hi = bisect.bisect_left(self._all_starts, interval.end)
        return [k for k in self._all_keys[lo:hi] if k.overlaps(interval)]

    def _add_visible(self, visible: _Visible[T], interval: Interval, entry: _Entry[T]) -> None:
        existing = visible.get(interval)
        if existing is not None:
            if entry.version > existing.version:
                visible.put(interval, entry)
            return
        lower = visible.lower_key(interval)
        if lower is not None and self._add_at_key(visible, lower, entry):
            return
        higher = visible.higher_key(interval)
        if higher is not None and self._add_at_key(visible, higher, entry):
            return
        visible.put(interval, entry)

    def _add_at_key(self, visible: _Visible[T], key: Interval, entry: _Entry[T]) -> bool:
        current: Interval | None = key
        if not key.overlaps(entry.true_interval):
            return False
        pending: Interval | None = entry.true_interval
        added = False
        while pending is not None and current is not None and current.overlaps(pending):
            next_key = visible.higher_key(current)
            existing = visible.get(current)
            assert existing is not None
            if entry.version < existing.version:
                if current.contains(pending):
                    return True
                if current.start < pending.start:
                    pending = Interval(current.end, pending.end)
                else:
                    visible.put(Interval(pending.start, current.start), entry)
                    pending = Interval(current.end, pending.end) if pending.end > current.end else None
            elif entry.version > existing.version:
                old = visible.pop(current)
                assert old is not None
                if current.contains(pending):
                    visible.put(Interval(current.start, pending.start), old)
                    visible.put(Interval(pending.end, current.end), old)
                    visible.put(pending, entry)
                    return True
                if current.start < pending.start:
                    visible.put(Interval(current.start, pending.start), old)
                elif pending.end < current.end:
                    visible.put(Interval(pending.end, current.end), old)
            else:
                if existing is entry:
                    visible.pop(current)  # re-adding the same entry (restore)
                else:
                    raise OverlappingSameVersionError(
                        f"Cannot add overlapping segments [{current} and {pending}] "
                        f"with the same version [{entry.version}]"
                    )
            current = next_key
            added = True
        if pending is not None:
            visible.put(pending, entry)
        return added

    def _remove_visible(self, visible: _Visible[T], entry: _Entry[T], incomplete_ok: bool) -> None:
        pieces = [
            visible.keys[i] for i in visible.overlapping(entry.true_interval) if visible.entries[i] is entry
        ]
        for piece in pieces:
            visible.pop(piece)
            for key in self._stored_overlapping(piece):
                versions = self._all[key]
                if incomplete_ok:
                    newest = versions[max(versions)]
                    self._add_visible(visible, key, newest)
                else:
                    for version in sorted(versions, reverse=True):
                        candidate = versions[version]
                        if candidate.holder.is_complete():
                            self._add_visible(visible, key, candidate)
                            break
