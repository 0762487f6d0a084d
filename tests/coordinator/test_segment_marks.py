"""Which segments the data-management API marks: unused by interval (wholly inside only), used only
where no newer complete version would hide them; the expected sets are worked out by hand."""

from __future__ import annotations

from strata.coordinator.segment_marks import not_overshadowed, unused_in, used_ids, used_in
from strata.storage.metadata_store import SegmentRecord
from timeline import DataSegment, Interval, ShardSpec


def seg(interval: str, version: str, part: int = 0, parts: int = 0) -> DataSegment:
    shard = ShardSpec.numbered(part, parts) if parts else ShardSpec.none()
    return DataSegment("w", Interval.parse(interval), version, {}, (), (), shard)


def rec(segment: DataSegment, used: bool) -> SegmentRecord:
    return SegmentRecord(segment, used, "2024-01-01T00:00:00.000Z")


DAY1, DAY2 = "2020-01-01/2020-01-02", "2020-01-02/2020-01-03"


def test_mark_unused_by_interval_takes_used_segments_wholly_inside() -> None:
    inside, straddling, other = (
        seg(DAY1, "v1"),
        seg("2020-01-01T12:00:00Z/2020-01-02T12:00:00Z", "v1"),
        seg(DAY2, "v1"),
    )
    records = [rec(inside, True), rec(straddling, True), rec(other, True), rec(seg(DAY1, "v0"), False)]
    assert unused_in(records, Interval.parse("2020-01-01/2020-01-02T06:00:00Z")) == [inside.id]


def test_mark_used_skips_what_a_newer_complete_version_hides() -> None:
    old, newer = seg(DAY1, "v1"), seg(DAY1, "v2")
    records = [rec(old, False), rec(newer, True), rec(seg(DAY2, "v1"), False)]
    assert used_in(records, None) == [seg(DAY2, "v1").id]  # the old day-1 version stays unused


def test_re_marking_a_dropped_history_brings_back_its_newest_versions_only() -> None:
    history = [seg(DAY1, "v1"), seg(DAY1, "v2"), seg(DAY2, "v1")]
    assert sorted(used_in([rec(s, False) for s in history], None)) == sorted(
        [seg(DAY1, "v2").id, seg(DAY2, "v1").id]
    )


def test_an_incomplete_newer_version_hides_nothing() -> None:
    old = seg(DAY1, "v1")
    half_of_newer = seg(DAY1, "v2", part=0, parts=2)  # partition 1 of 2 is missing
    assert not_overshadowed([rec(half_of_newer, True)], [old]) == [old.id]
    whole = [half_of_newer, seg(DAY1, "v2", part=1, parts=2)]
    assert not_overshadowed([rec(s, True) for s in whole], [old]) == []


def test_a_newer_version_covering_only_part_of_the_interval_hides_nothing() -> None:
    old = seg("2020-01-01/2020-01-03", "v1")
    assert not_overshadowed([rec(seg(DAY1, "v2"), True)], [old]) == [old.id]
    both = [rec(seg(DAY1, "v2"), True), rec(seg(DAY2, "v3"), True)]
    assert not_overshadowed(both, [old]) == []


def test_mark_used_by_ids_names_the_unknown_ones() -> None:
    old, newer, dropped = seg(DAY1, "v1"), seg(DAY1, "v2"), seg(DAY2, "v1")
    records = [rec(old, False), rec(newer, True), rec(dropped, False)]
    chosen, unknown = used_ids(records, [old.id, dropped.id, "nope", dropped.id])
    assert (chosen, unknown) == ([dropped.id], ["nope"])
