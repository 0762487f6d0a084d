"""The used segments a reader remembers, kept in id order and changed in place.

A historical over 100,000 segments asks for all of them every pass; re-sorting them after each
publish cost ~0.1 s, so a change of k segments costs k binary searches here instead.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable

from timeline import DataSegment


class UsedSet:
    def __init__(self, segments: Iterable[DataSegment] = ()):
        ordered = sorted(segments, key=lambda s: s.id)
        self._ids = [s.id for s in ordered]
        self._segments = ordered
        self._by_source: dict[str, list[DataSegment]] = {}

    def __len__(self) -> int:
        return len(self._ids)

    def apply(self, touched: Iterable[str], used_now: Iterable[DataSegment]) -> None:
        """`touched` ids changed; of them, `used_now` are the ones used after the change."""
        for sid in touched:
            i = bisect.bisect_left(self._ids, sid)
            if i < len(self._ids) and self._ids[i] == sid:
                del self._ids[i], self._segments[i]
        for segment in used_now:
            i = bisect.bisect_left(self._ids, segment.id)
            if i < len(self._ids) and self._ids[i] == segment.id:
                self._segments[i] = segment
            else:
                self._ids.insert(i, segment.id)
                self._segments.insert(i, segment)
        self._by_source = {}

    def listed(self, data_source: str | None = None) -> list[DataSegment]:
        """A new list (the caller's own), in id order."""
        if data_source is None:
            return list(self._segments)
        found = self._by_source.get(data_source)
        if found is None:
            found = self._by_source[data_source] = [s for s in self._segments if s.data_source == data_source]
        return list(found)
