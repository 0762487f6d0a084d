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


@dataclass(frozen=True, slots=True)
class Replacement:
    """What a REPLACE drops: every used segment of `data_source` lying inside `intervals` goes
    unused in the publish that brings the new segments (even where the new data has no rows)."""

    data_source: str
    intervals: tuple[Interval, ...]


class MetadataStore(Protocol):
    def publish(
        self,
        segments: Sequence[DataSegment],
        *,
        overwrite: bool,
        guard: TransactionGuard | None = None,
        replace: Replacement | None = None,
    ) -> None:
        """Insert all segments in one transaction; with `overwrite`, mark the used segments of the
        same data sources that the new ones overshadow unused in that same transaction, and with
        `replace` those it names (`plan_publish`). `guard` runs first in that transaction."""
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


def plan_publish(
    new: Sequence[DataSegment],
    used: Sequence[DataSegment],
    *,
    overwrite: bool,
    replace: Replacement | None = None,
) -> PublishPlan:
    """The overwrite rule both stores apply inside their publish transaction, given the used
    segments of the new segments' data sources (and the replaced one) as that transaction sees them.

    The higher version wins whichever publisher commits last: two jobs overwriting the same day
    leave exactly one job's segments used, never a mix of both. A replacement also drops the used
    segments inside its intervals; one that reaches outside them and stays partly visible would keep
    serving replaced rows, so the publish is refused (`MetadataStoreError`) instead.
    """
    dropped = [] if replace is None else replaced(new, used, replace)
    if not overwrite:
        return PublishPlan(dropped, set())
    higher: dict[tuple[str, str], list[Interval]] = {}  # (data source, version): spans of newer used
    for ds, version in {(n.data_source, n.version) for n in new}:
        higher[(ds, version)] = _union(
            [u.interval for u in used if u.data_source == ds and u.version > version]
        )
    lost = {
        n.id for n in new
        if any(span.contains(n.interval) for span in higher[(n.data_source, n.version)])
    }  # fmt: skip
    stale = [s.id for s in overshadowed_by(new, used)]
    return PublishPlan(stale + [i for i in dropped if i not in set(stale)], lost)


def replaced(new: Sequence[DataSegment], used: Sequence[DataSegment], replace: Replacement) -> list[str]:
    """Ids of the used segments `replace` drops; `MetadataStoreError` for one it would cut."""
    ids = []
    newer = _union([n.interval for n in new])
    for seg in used:
        if seg.data_source != replace.data_source:
            continue
        if any(iv.contains(seg.interval) for iv in replace.intervals):
            ids.append(seg.id)
        elif any(iv.overlaps(seg.interval) for iv in replace.intervals) and not any(
            span.contains(seg.interval) for span in newer
        ):
            spans = ", ".join(str(iv) for iv in replace.intervals)
            raise MetadataStoreError(
                f"cannot replace [{spans}] of [{replace.data_source}]: segment {seg.id} reaches outside it "
                "and would keep serving replaced rows; replace whole segments of the existing granularity"
            )
    return ids


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
