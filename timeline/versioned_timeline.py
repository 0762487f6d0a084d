"""Druid's VersionedIntervalTimeline: which (interval, version, partitions) are visible.

Every added (interval, version) is kept; two "visible" maps hold non-overlapping pieces of the
newest version at each instant: one built from complete partition sets only (what queries use),
one from any set (for queries that name exact segments). Both are sorted maps of pieces
(`IntervalMap`, blocks of sorted lists), so a lookup is a bisect plus the pieces it returns,
O(log n + k), and an insert moves one block, not every piece after it.

Not thread-safe by design: the broker mutates and reads timelines only on its event-loop thread,
so a query always sees a consistent state without locks.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Generic, NamedTuple, TypeVar

from timeline.interval import Interval
from timeline.interval_map import IntervalMap
from timeline.partition_holder import PartitionHolder
from timeline.shard_spec import PartitionChunk

if TYPE_CHECKING:
    from timeline.segment import DataSegment

T = TypeVar("T")

# one counter for every timeline: a generation is never reused, even by a timeline made later
_GENERATIONS = itertools.count(1)


class OverlappingSameVersionError(ValueError):
    """Two different entries with the same version cover overlapping intervals."""


class _Entry(PartitionHolder[T]):
    """One stored (interval, version) and its partitions: a holder itself, not beside one (a
    broker holds one per segment, so one object rather than two)."""

    __slots__ = ("true_interval", "version")

    def __init__(self, true_interval: Interval, version: str):
        super().__init__()
        self.true_interval = true_interval
        self.version = version

    @property
    def holder(self) -> PartitionHolder[T]:
        return self


# the versions stored for one interval, oldest first: nearly always one, and a tuple of one weighs
# a third of a dict of one (a broker holds one per segment); stored as the entry itself when it is
# the only one (the tuple of one was 48 B a segment), see `_stored` and `_unstored`
_Versions = tuple["_Entry[T]", ...]


def _stored(versions: _Versions[T]) -> _Entry[T] | _Versions[T]:
    return versions[0] if len(versions) == 1 else versions


def _unstored(stored: _Entry[T] | _Versions[T] | None) -> _Versions[T]:
    if stored is None:
        return ()
    return stored if isinstance(stored, tuple) else (stored,)


def _version(versions: _Versions[T], version: str) -> _Entry[T] | None:
    for entry in versions:
        if entry.version == version:
            return entry
    return None


def _with(versions: _Versions[T], entry: _Entry[T]) -> _Versions[T]:
    if not versions:
        return (entry,)
    return tuple(sorted((*versions, entry), key=lambda e: e.version))


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


class VersionedIntervalTimeline(Generic[T]):
    def __init__(self) -> None:
        # every stored (interval, version), by interval: sorted, for overlap queries over them all
        self._all: IntervalMap[_Entry[T] | _Versions[T]] = IntervalMap()
        self._max_duration = 0
        self._complete: IntervalMap[_Entry[T]] = IntervalMap()
        self._incomplete: IntervalMap[_Entry[T]] = IntervalMap()
        # changes on every add and remove: what was looked up at one generation holds until the next
        self.generation = next(_GENERATIONS)

    # -- mutation -------------------------------------------------------------------------------------
    def add(self, interval: Interval, version: str, chunk: PartitionChunk[T]) -> None:
        self.generation = next(_GENERATIONS)
        versions = _unstored(self._all.get(interval))
        if not versions:
            self._max_duration = max(self._max_duration, interval.duration_ms)
        entry = _version(versions, version)
        if entry is None:
            entry = _Entry(interval, version)
            self._all.set(interval, _stored(_with(versions, entry)))
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
        versions = _unstored(self._all.get(interval))
        entry = _version(versions, version)
        if entry is None:
            return None
        removed = entry.holder.remove(chunk)
        if removed is None:
            return None
        if entry.holder.is_empty():
            left = tuple(e for e in versions if e is not entry)
            if left:
                self._all.set(interval, _stored(left))
            else:
                self._all.pop(interval)
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
        entry = _version(_unstored(self._all.get(interval)), version)
        if entry is not None:
            return entry.holder.get(partition_num)
        for key in self._stored_overlapping(interval):
            if key.contains(interval):
                entry = _version(_unstored(self._all.get(key)), version)
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
        pieces = visible.rows_from(interval.start)
        first = next(pieces, None)
        if first is None or first[0].start > interval.start or not first[0].overlaps(interval):
            return False
        prev_end: int | None = None
        for key, piece in itertools.chain((first,), pieces):
            if prev_end is not None and key.start > prev_end:
                return False
            if version >= piece.version:
                return False
            prev_end = key.end
            if interval.end <= prev_end:
                return True
        return False

    def find_fully_overshadowed(self) -> list[TimelineObjectHolder[T]]:
        """Stored (interval, version) sets visible in neither map: safe to drop."""
        visible = {id(e) for e in self._complete.values()} | {id(e) for e in self._incomplete.values()}
        out = []
        for key, stored in self._all.items():
            for entry in _unstored(stored):
                if id(entry) not in visible:
                    out.append(TimelineObjectHolder(key, key, entry.version, entry.holder.chunks()))
        return out

    def iterate_all_objects(self) -> Iterator[T]:
        for stored in self._all.values():
            for entry in _unstored(stored):
                for chunk in entry.holder:
                    yield chunk.object

    def is_empty(self) -> bool:
        return not self._all

    def __len__(self) -> int:
        """Number of stored chunks."""
        return sum(len(e.holder) for v in self._all.values() for e in _unstored(v))

    # -- internals ------------------------------------------------------------------------------------
    def _lookup(self, visible: IntervalMap[_Entry[T]], interval: Interval) -> list[TimelineObjectHolder[T]]:
        if interval.start >= interval.end:
            return []
        keys, entries = visible.overlapping(interval)
        out = [
            TimelineObjectHolder(key, e.true_interval, e.version, e.holder.chunks())
            for key, e in zip(keys, entries, strict=True)
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
        keys, _ = self._all.starting_in(interval.start - self._max_duration + 1, interval.end)
        return [k for k in keys if k.overlaps(interval)]

    def _add_visible(self, visible: IntervalMap[_Entry[T]], interval: Interval, entry: _Entry[T]) -> None:
        existing, lower, higher = visible.around(interval)
        if existing is not None:
            if entry.version > existing.version:
                _put(visible, interval, entry)
            return
        if lower is not None and self._add_at_key(visible, lower, entry):
            return
        # (_add_at_key changed nothing when it answered False: `higher` still holds)
        if higher is not None and self._add_at_key(visible, higher, entry):
            return
        _put(visible, interval, entry)

    def _add_at_key(self, visible: IntervalMap[_Entry[T]], key: Interval, entry: _Entry[T]) -> bool:
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
                    _put(visible, Interval(pending.start, current.start), entry)
                    pending = Interval(current.end, pending.end) if pending.end > current.end else None
            elif entry.version > existing.version:
                old = visible.pop(current)
                assert old is not None
                if current.contains(pending):
                    _put(visible, Interval(current.start, pending.start), old)
                    _put(visible, Interval(pending.end, current.end), old)
                    _put(visible, pending, entry)
                    return True
                if current.start < pending.start:
                    _put(visible, Interval(current.start, pending.start), old)
                elif pending.end < current.end:
                    _put(visible, Interval(pending.end, current.end), old)
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
            _put(visible, pending, entry)
        return added

    def _remove_visible(self, visible: IntervalMap[_Entry[T]], entry: _Entry[T], incomplete_ok: bool) -> None:
        keys, entries = visible.overlapping(entry.true_interval)
        pieces = [key for key, e in zip(keys, entries, strict=True) if e is entry]
        for piece in pieces:
            visible.pop(piece)
            for key in self._stored_overlapping(piece):
                versions = _unstored(self._all.get(key))
                if incomplete_ok:
                    self._add_visible(visible, key, versions[-1])  # the newest
                else:
                    for candidate in reversed(versions):
                        if candidate.holder.is_complete():
                            self._add_visible(visible, key, candidate)
                            break


def _put(visible: IntervalMap[_Entry[T]], key: Interval, entry: _Entry[T]) -> None:
    if key.end > key.start:  # an empty piece shows nothing
        visible.set(key, entry)
