"""The metadata store interface: which segments exist and which of them are used.

Nothing outside `storage` may know which database sits behind it: SQLite is the embedded default,
PostgreSQL serves clusters, both behind this Protocol (one contract test suite runs on both).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from strata.storage.store_errors import (
    MetadataStoreError as MetadataStoreError,  # re-exported: its home for callers
)
from timeline import DataSegment, Interval

if TYPE_CHECKING:
    from strata.storage.schema import Migration


TransactionGuard = Callable[[Any], None]
"""Run first inside a publish's (or delete's) own transaction with its DB-API connection; raising
aborts the whole change. The coordinator's tasks check there that they still hold their interval
locks and have not been shut down (strata.storage.task_store), so the check and the change commit
together or not at all."""


@dataclass(frozen=True, slots=True)
class SegmentRecord:
    segment: DataSegment
    used: bool
    created_date: str


class MetadataStore(Protocol):
    def publish(
        self, segments: Sequence[DataSegment], *, overwrite: bool, guard: TransactionGuard | None = None
    ) -> None:
        """Insert all segments in one transaction; with `overwrite`, mark the used segments of the
        same data sources that the new ones overshadow unused in that same transaction. `guard`
        runs first in that transaction."""
        ...

    def used_segments(self, data_source: str | None = None) -> list[DataSegment]: ...

    def segments(
        self, data_source: str | None = None, include_unused: bool = False
    ) -> list[SegmentRecord]: ...

    def mark_unused(self, ids: Iterable[str]) -> int: ...

    def mark_used(self, ids: Iterable[str]) -> int: ...

    def delete_unused(self, ids: Iterable[str], *, guard: TransactionGuard | None = None) -> int:
        """Remove the rows of these segments that are unused (`strata segments kill`, a kill task);
        used ones stay. `guard` runs first in the same transaction. Returns how many rows went."""
        ...

    def data_sources(self) -> list[str]: ...

    def subscribe(self, callback: Callable[[], None]) -> None:
        """Call `callback` from another thread soon after the segments change (PostgreSQL NOTIFY);
        a store without notifications (SQLite) never calls it and its readers poll."""
        ...

    # for other modules' tables in the same database (security's credentials, say)
    @property
    def dialect(self) -> str:
        """ "sqlite" or "postgresql": which SQL `transaction()` speaks."""
        ...

    def transaction(self) -> AbstractContextManager[Any]:
        """A DB-API connection inside one transaction (committed on exit, rolled back on error)."""
        ...

    def migrate(self, component: str, migrations: Sequence[Migration]) -> int:
        """Create or upgrade a component's tables (storage.schema); returns its schema version."""
        ...

    def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class PublishPlan:
    """What one publish changes: existing used segments it marks unused, and the new segments that
    go in unused because a used segment of a higher version already covers them."""

    stale: list[str]
    lost: set[str]


def plan_publish(new: Sequence[DataSegment], used: Sequence[DataSegment], *, overwrite: bool) -> PublishPlan:
    """The overwrite rule both stores apply inside their publish transaction, given the used
    segments of the new segments' data sources as that transaction sees them.

    The higher version wins whichever publisher commits last: two jobs overwriting the same day
    leave exactly one job's segments used, never a mix of both.
    """
    if not overwrite:
        return PublishPlan([], set())
    higher: dict[tuple[str, str], list[Interval]] = {}  # (data source, version): spans of newer used
    for ds, version in {(n.data_source, n.version) for n in new}:
        higher[(ds, version)] = _union(
            [u.interval for u in used if u.data_source == ds and u.version > version]
        )
    lost = {
        n.id for n in new
        if any(span.contains(n.interval) for span in higher[(n.data_source, n.version)])
    }  # fmt: skip
    return PublishPlan([s.id for s in overshadowed_by(new, used)], lost)


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
