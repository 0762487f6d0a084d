"""The metadata store interface: which segments exist and which of them are used.

Nothing outside `storage` may know which database sits behind it: SQLite is the embedded default,
PostgreSQL comes later for clusters, both behind this Protocol.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from timeline import DataSegment, Interval


class MetadataStoreError(RuntimeError):
    """The store cannot be opened or a change to it was refused."""


@dataclass(frozen=True, slots=True)
class SegmentRecord:
    segment: DataSegment
    used: bool
    created_date: str


class MetadataStore(Protocol):
    def publish(self, segments: Sequence[DataSegment], *, overwrite: bool) -> None:
        """Insert all segments in one transaction; with `overwrite`, mark the used segments of the
        same data sources that the new ones overshadow unused in that same transaction."""
        ...

    def used_segments(self, data_source: str | None = None) -> list[DataSegment]: ...

    def segments(
        self, data_source: str | None = None, include_unused: bool = False
    ) -> list[SegmentRecord]: ...

    def mark_unused(self, ids: Iterable[str]) -> int: ...

    def mark_used(self, ids: Iterable[str]) -> int: ...

    def data_sources(self) -> list[str]: ...

    def close(self) -> None: ...


def overshadowed_by(new: Sequence[DataSegment], existing: Iterable[DataSegment]) -> list[DataSegment]:
    """Existing segments whose whole interval is covered by the new segments of a higher version.

    Coverage is by the union of the new segments' intervals per data source, as Druid's timeline
    decides overshadowing; a segment only partly covered stays used.
    """
    by_source: dict[str, list[tuple[Interval, str]]] = {}
    for seg in new:
        by_source.setdefault(seg.data_source, []).append((seg.interval, seg.version))
    covered: dict[str, list[Interval]] = {ds: _union([iv for iv, _ in ivs]) for ds, ivs in by_source.items()}
    min_version = {ds: min(v for _, v in ivs) for ds, ivs in by_source.items()}
    out = []
    for seg in existing:
        spans = covered.get(seg.data_source)
        if spans is None or seg.version >= min_version[seg.data_source]:
            continue
        if any(span.contains(seg.interval) for span in spans):
            out.append(seg)
    return out


def _union(intervals: list[Interval]) -> list[Interval]:
    merged: list[Interval] = []
    for iv in sorted(intervals):
        if merged and iv.start <= merged[-1].end:
            last = merged[-1]
            merged[-1] = Interval(last.start, max(last.end, iv.end))
        else:
            merged.append(iv)
    return merged
