"""Which announced segment sits in which batch znode (pure bookkeeping for the ZK announcer).

New segments fill a batch that still has room (Druid's rule), else a new batch is opened; an
unannounce rewrites the batch, or deletes it when it becomes empty. Each change reports the batch
names whose content changed so only those znodes are rewritten. Only batches below the segment
count limit are searched for room: with 100,000 segments in 2,000 full batches, a scan of all of
them per added segment took most of a historical's start-up.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from strata.discovery import BatchLimits, encode_batch, encode_segment
from timeline import DataSegment


class _Batch:
    __slots__ = ("items", "size")

    def __init__(self) -> None:
        self.items: dict[str, bytes] = {}
        self.size = 2  # "[]"

    def fits(self, item: bytes, limits: BatchLimits) -> bool:
        extra = len(item) + (1 if self.items else 0)
        return len(self.items) < limits.segments_per_node and self.size + extra <= limits.max_bytes_per_node

    def add(self, segment_id: str, item: bytes) -> None:
        self.size += len(item) + (1 if self.items else 0)
        self.items[segment_id] = item

    def remove(self, segment_id: str) -> None:
        item = self.items.pop(segment_id)
        self.size -= len(item) + (1 if self.items else 0)


class BatchSet:
    def __init__(self, limits: BatchLimits, new_name: Callable[[], str]):
        self.limits = limits
        self._new_name = new_name
        self._batches: dict[str, _Batch] = {}
        self._open: dict[str, _Batch] = {}  # batches below the segment count limit, oldest first
        self._where: dict[str, str] = {}  # segment id -> batch name

    def __contains__(self, segment_id: object) -> bool:
        return segment_id in self._where

    def __len__(self) -> int:
        return len(self._where)

    def add(self, segments: Iterable[DataSegment]) -> set[str]:
        changed: set[str] = set()
        for segment in segments:
            if segment.id in self._where:
                continue
            item = encode_segment(segment)
            if len(item) + 2 > self.limits.max_bytes_per_node:
                raise ValueError(f"segment {segment.id} does not fit in one batch znode ({len(item)} bytes)")
            name = next((n for n, b in self._open.items() if b.fits(item, self.limits)), None)
            if name is None:
                name = self._new_name()
                self._batches[name] = self._open[name] = _Batch()
            batch = self._batches[name]
            batch.add(segment.id, item)
            if len(batch.items) >= self.limits.segments_per_node:
                del self._open[name]
            self._where[segment.id] = name
            changed.add(name)
        return changed

    def remove(self, segment_ids: Iterable[str]) -> set[str]:
        changed: set[str] = set()
        for segment_id in segment_ids:
            name = self._where.pop(segment_id, None)
            if name is None:
                continue
            self._batches[name].remove(segment_id)
            changed.add(name)
        for name in changed:
            if not self._batches[name].items:
                del self._batches[name]
        if changed:  # batches with room again, kept in creation order: the oldest fills first
            self._open = {
                n: b for n, b in self._batches.items() if len(b.items) < self.limits.segments_per_node
            }
        return changed

    def content(self, name: str) -> bytes | None:
        """The znode's JSON array, or None when the batch no longer exists (delete the znode)."""
        batch = self._batches.get(name)
        return None if batch is None else encode_batch(batch.items.values())

    def names(self) -> list[str]:
        return list(self._batches)
