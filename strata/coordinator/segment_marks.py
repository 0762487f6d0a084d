"""Which segments a mark-used or mark-unused request changes, as Druid's coordinator decides (pure).

- Marking unused by interval takes the used segments whose interval lies wholly inside it (a
  segment only partly inside is left alone); by ids, the ids of this data source.
- Marking used takes only segments no used segment overshadows: complete partition sets of a
  newer version covering the whole interval (timeline.VersionedIntervalTimeline), with the
  segments being marked counted as used, so re-marking an old version next to a newer one does
  nothing, and re-marking a whole dropped history brings back only its newest visible versions.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from strata.storage.metadata_store import SegmentRecord
from timeline import DataSegment, Interval, OverlappingSameVersionError, VersionedIntervalTimeline


def unused_in(records: Sequence[SegmentRecord], interval: Interval) -> list[str]:
    """Used segments wholly inside `interval`, to mark unused."""
    return [r.segment.id for r in records if r.used and interval.contains(r.segment.interval)]


def not_overshadowed(records: Sequence[SegmentRecord], candidates: Iterable[DataSegment]) -> list[str]:
    """The unused `candidates` that would not be overshadowed once marked used (with each other)."""
    chosen = [c for c in candidates]
    timeline: VersionedIntervalTimeline[str] = VersionedIntervalTimeline()
    for segment in [r.segment for r in records if r.used] + chosen:
        try:
            timeline.add_segment(segment, segment.id)
        except OverlappingSameVersionError:
            continue  # overlapping segments of one version: the timeline keeps the first
    return [c.id for c in chosen if not timeline.is_overshadowed(c.interval, c.version, c.id)]


def used_in(records: Sequence[SegmentRecord], interval: Interval | None) -> list[str]:
    """Unused segments (wholly inside `interval` when given) to mark used, overshadowed ones left."""
    candidates = [
        r.segment for r in records
        if not r.used and (interval is None or interval.contains(r.segment.interval))
    ]  # fmt: skip
    return not_overshadowed(records, candidates)


def used_ids(records: Sequence[SegmentRecord], ids: Iterable[str]) -> tuple[list[str], list[str]]:
    """(ids to mark used, ids this data source does not have) for a mark-used by ids."""
    wanted = list(dict.fromkeys(ids))
    by_id = {r.segment.id: r for r in records}
    unknown = [i for i in wanted if i not in by_id]
    candidates = [by_id[i].segment for i in wanted if i in by_id and not by_id[i].used]
    return not_overshadowed(records, candidates), unknown
