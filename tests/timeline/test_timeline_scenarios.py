"""Druid's VersionedIntervalTimeline test scenarios, each asserting the exact holders returned.

Dates are in January 2011 unless given in full; every entry holds one partition whose object is
an integer. Expected holders are (interval, version, [objects]) and were worked out by hand from
Druid's rules: at each instant the highest version among complete partition sets is visible.
"""

from __future__ import annotations

import pytest

from timeline import Interval, OverlappingSameVersionError, ShardSpec, VersionedIntervalTimeline
from timeline.shard_spec import NumberedPartitionChunk, SingleElementPartitionChunk, StringPartitionChunk


def iv(text: str) -> Interval:
    """`05/10` -> 2011-01-05/2011-01-10; full ISO intervals pass through."""

    def fix(part: str) -> str:
        if len(part) <= 2:
            return f"2011-01-{part}"
        return f"2011-{part}" if len(part) == 5 else part

    a, b = text.split("/")
    return Interval.parse(f"{fix(a)}/{fix(b)}")


def single(obj: int) -> SingleElementPartitionChunk[int]:
    return SingleElementPartitionChunk(0, obj)


def add(tl: VersionedIntervalTimeline[int], interval: str, version: str, obj: int) -> None:
    tl.add(iv(interval), version, single(obj))


def remove(tl: VersionedIntervalTimeline[int], interval: str, version: str, obj: int) -> None:
    assert tl.remove(iv(interval), version, single(obj)) is not None


def holders(tl: VersionedIntervalTimeline[int], interval: str, incomplete: bool = False):
    found = tl.lookup_with_incomplete_partitions(iv(interval)) if incomplete else tl.lookup(iv(interval))
    return [(h.interval, h.version, h.objects) for h in found]


def expected(*rows: tuple[str, str, list[int]]):
    return [(iv(i), v, objs) for i, v, objs in rows]


# (name, ops, lookup interval, expected holders); an op is ("add"|"remove", interval, version, obj)
SCENARIOS: list[tuple[str, list[tuple[str, str, str, int]], str, list[tuple[str, str, list[int]]]]] = [
    ("overlap_first_between", [("add", "05/10", "2", 1), ("add", "01/15", "1", 2)], "01/15",
     [("01/05", "1", [2]), ("05/10", "2", [1]), ("10/15", "1", [2])]),
    ("overlap_second_between", [("add", "01/15", "1", 2), ("add", "05/10", "2", 1)], "01/15",
     [("01/05", "1", [2]), ("05/10", "2", [1]), ("10/15", "1", [2])]),
    ("overlap_first_before", [("add", "01/10", "2", 1), ("add", "05/15", "1", 2)], "01/15",
     [("01/10", "2", [1]), ("10/15", "1", [2])]),
    ("overlap_first_after", [("add", "05/15", "2", 1), ("add", "01/10", "1", 2)], "01/15",
     [("01/05", "1", [2]), ("05/15", "2", [1])]),
    ("overlap_second_before", [("add", "05/15", "1", 2), ("add", "01/10", "2", 1)], "01/15",
     [("01/10", "2", [1]), ("10/15", "1", [2])]),
    ("overlap_second_after", [("add", "01/10", "1", 2), ("add", "05/15", "2", 1)], "01/15",
     [("01/05", "1", [2]), ("05/15", "2", [1])]),
    ("overlap_first_larger", [("add", "01/20", "1", 2), ("add", "05/15", "2", 3)], "01/20",
     [("01/05", "1", [2]), ("05/15", "2", [3]), ("15/20", "1", [2])]),
    ("overlap_second_larger", [("add", "05/15", "2", 3), ("add", "01/20", "1", 2)], "01/20",
     [("01/05", "1", [2]), ("05/15", "2", [3]), ("15/20", "1", [2])]),
    ("overlap_second_partial_align", [("add", "01/10", "1", 1), ("add", "01/15", "2", 2)], "01/15",
     [("01/15", "2", [2])]),
    ("overlap_first_partial_align", [("add", "01/15", "1", 1), ("add", "01/10", "2", 2)], "01/15",
     [("01/10", "2", [2]), ("10/15", "1", [1])]),
    ("overlap_ascending", [("add", "01/10", "1", 1), ("add", "05/20", "2", 2), ("add", "03/06", "3", 3)], "01/20",
     [("01/03", "1", [1]), ("03/06", "3", [3]), ("06/20", "2", [2])]),
    ("overlap_descending", [("add", "03/06", "3", 3), ("add", "05/20", "2", 2), ("add", "01/10", "1", 1)], "01/20",
     [("01/03", "1", [1]), ("03/06", "3", [3]), ("06/20", "2", [2])]),
    ("overlap_mixed", [("add", "05/20", "2", 2), ("add", "03/06", "3", 3), ("add", "01/10", "1", 1)], "01/20",
     [("01/03", "1", [1]), ("03/06", "3", [3]), ("06/20", "2", [2])]),
    ("overlap_contained_ascending",
     [("add", "01/20", "1", 1), ("add", "02/10", "2", 2), ("add", "02/06", "3", 3)], "01/20",
     [("01/02", "1", [1]), ("02/06", "3", [3]), ("06/10", "2", [2]), ("10/20", "1", [1])]),
    ("overlap_contained_descending",
     [("add", "02/06", "3", 3), ("add", "02/10", "2", 2), ("add", "01/20", "1", 1)], "01/20",
     [("01/02", "1", [1]), ("02/06", "3", [3]), ("06/10", "2", [2]), ("10/20", "1", [1])]),
    ("overlap_contained_mixed",
     [("add", "02/10", "2", 2), ("add", "02/06", "3", 3), ("add", "01/20", "1", 1)], "01/20",
     [("01/02", "1", [1]), ("02/06", "3", [3]), ("06/10", "2", [2]), ("10/20", "1", [1])]),
    ("overlap_second_contained",
     [("add", "01/07", "1", 1), ("add", "07/15", "1", 2), ("add", "15/20", "1", 3), ("add", "10/15", "2", 4)],
     "01/20", [("01/07", "1", [1]), ("07/10", "1", [2]), ("10/15", "2", [4]), ("15/20", "1", [3])]),
    ("overlap_first_contained",
     [("add", "10/15", "2", 4), ("add", "01/07", "1", 1), ("add", "07/15", "1", 2), ("add", "15/20", "1", 3)],
     "01/20", [("01/07", "1", [1]), ("07/10", "1", [2]), ("10/15", "2", [4]), ("15/20", "1", [3])]),
    ("overlap_second_contains_first",
     [("add", "01/20", "1", 1), ("add", "01/10", "2", 2), ("add", "10/20", "2", 3)], "01/20",
     [("01/10", "2", [2]), ("10/20", "2", [3])]),
    ("overlap_first_contains_second",
     [("add", "10/20", "2", 3), ("add", "01/10", "2", 2), ("add", "01/20", "1", 1)], "01/20",
     [("01/10", "2", [2]), ("10/20", "2", [3])]),
    ("overlap_layered_ascending",
     [("add", "01/10", "1", 1), ("add", "05/15", "2", 2), ("add", "15/25", "3", 3)], "01/25",
     [("01/05", "1", [1]), ("05/15", "2", [2]), ("15/25", "3", [3])]),
    ("overlap_layered_descending",
     [("add", "15/25", "3", 3), ("add", "05/15", "2", 2), ("add", "01/10", "1", 1)], "01/25",
     [("01/05", "1", [1]), ("05/15", "2", [2]), ("15/25", "3", [3])]),
    ("overlap_v1_large", [("add", "01/15", "1", 1), ("add", "03/05", "2", 2), ("add", "13/20", "2", 3)], "01/20",
     [("01/03", "1", [1]), ("03/05", "2", [2]), ("05/13", "1", [1]), ("13/20", "2", [3])]),
    ("overlap_v2_large", [("add", "01/15", "2", 1), ("add", "03/05", "1", 2), ("add", "13/17", "1", 3)], "01/20",
     [("01/15", "2", [1]), ("15/17", "1", [3])]),
    ("overlap_v1_large_is_after",
     [("add", "03/20", "1", 1), ("add", "01/05", "2", 2), ("add", "13/17", "2", 3)], "01/20",
     [("01/05", "2", [2]), ("05/13", "1", [1]), ("13/17", "2", [3]), ("17/20", "1", [1])]),
    ("overlap_v1_second_large_is_after",
     [("add", "13/17", "2", 3), ("add", "01/05", "2", 2), ("add", "03/20", "1", 1)], "01/20",
     [("01/05", "2", [2]), ("05/13", "1", [1]), ("13/17", "2", [3]), ("17/20", "1", [1])]),
    ("overlap_v1_first_between",
     [("add", "03/17", "1", 1), ("add", "01/05", "2", 2), ("add", "15/20", "2", 3)], "01/20",
     [("01/05", "2", [2]), ("05/15", "1", [1]), ("15/20", "2", [3])]),
    ("overlap_v1_second_between",
     [("add", "01/05", "2", 2), ("add", "15/20", "2", 3), ("add", "03/17", "1", 1)], "01/20",
     [("01/05", "2", [2]), ("05/15", "1", [1]), ("15/20", "2", [3])]),
    ("large_underlying_with_small_day_aligned_overlays",
     [("add", "01/05", "1", 1), ("add", "03/04", "2", 2), ("add", "04/05", "3", 3)], "01/05",
     [("01/03", "1", [1]), ("03/04", "2", [2]), ("04/05", "3", [3])]),
    ("overlap_causes_null_entries",
     [("add", "2011-01-01T12/2011-01-02", "3", 1), ("add", "2011-01-02/3011-01-03", "4", 2),
      ("add", "01/02", "5", 3)], "01/03",
     [("01/02", "5", [3]), ("02/03", "4", [2])]),
    ("overlap_overshadowed_third_contains",
     [("add", "03/06", "1", 1), ("add", "09/12", "1", 2), ("add", "02/08", "2", 3), ("add", "10/16", "2", 4),
      ("add", "01/20", "3", 5)], "01/20", [("01/20", "3", [5])]),
    ("overlap_overshadowed_aligned",
     [("add", "01/05", "2", 1), ("add", "05/10", "2", 2), ("add", "01/10", "1", 3)], "01/10",
     [("01/05", "2", [1]), ("05/10", "2", [2])]),
    ("overlap_overshadowed_complex",
     [("add", "01/05", "2", 1), ("add", "10/15", "2", 2), ("add", "03/12", "3", 3)], "01/15",
     [("01/03", "2", [1]), ("03/12", "3", [3]), ("12/15", "2", [2])]),
    ("overlap_and_remove",
     [("add", "01/20", "1", 1), ("add", "10/15", "2", 2), ("remove", "10/15", "2", 2)], "01/20",
     [("01/20", "1", [1])]),
    ("overlap_and_remove2",
     [("add", "01/20", "1", 1), ("add", "10/20", "2", 2), ("add", "20/30", "3", 3), ("remove", "10/20", "2", 2)],
     "01/30", [("01/20", "1", [1]), ("20/30", "3", [3])]),
    ("overlap_and_remove3",
     [("add", "01/20", "1", 1), ("add", "02/03", "2", 2), ("add", "10/14", "2", 3), ("remove", "02/03", "2", 2),
      ("remove", "10/14", "2", 3)], "01/20", [("01/20", "1", [1])]),
    ("overlap_and_remove4",
     [("add", "01/20", "1", 1), ("add", "10/15", "2", 2), ("add", "15/20", "2", 3), ("remove", "15/20", "2", 3)],
     "01/20", [("01/10", "1", [1]), ("10/15", "2", [2]), ("15/20", "1", [1])]),
    ("overlap_and_remove5",
     [("add", "01/20", "1", 1), ("add", "10/15", "2", 2), ("remove", "10/15", "2", 2), ("add", "01/20", "1", 1)],
     "01/20", [("01/20", "1", [1])]),
    ("remove_nothing_backing",
     [("add", "01/05", "1", 1), ("add", "05/10", "2", 2), ("add", "10/15", "3", 3), ("add", "15/20", "4", 4),
      ("remove", "15/20", "4", 4)], "01/20", [("01/05", "1", [1]), ("05/10", "2", [2]), ("10/15", "3", [3])]),
    ("same_version_same_interval_is_okay",
     [("add", "01/10", "1", 1), ("add", "01/10", "2", 2), ("add", "01/10", "2", 3), ("add", "01/10", "1", 4)],
     "01/10", [("01/10", "2", [2])]),
    ("zero_length_lookup_is_empty", [("add", "01/20", "1", 1)], "10/10", []),
    ("not_found_returns_empty", [], "01/20", []),
    ("lookup_clips_first_and_last_only",
     [("add", "01/05", "1", 1), ("add", "05/10", "1", 2), ("add", "10/15", "1", 3)], "2011-01-03T12/2011-01-12",
     [("2011-01-03T12/2011-01-05", "1", [1]), ("05/10", "1", [2]), ("10/12", "1", [3])]),
    ("gap_produces_no_holder", [("add", "01/05", "1", 1), ("add", "10/15", "1", 2)], "01/15",
     [("01/05", "1", [1]), ("10/15", "1", [2])]),
    ("insert_in_wrong_order",
     [("add", "05/06", "1", 1), ("add", "06/07", "1", 2), ("add", "07/08", "1", 3), ("add", "04/10", "2", 4),
      ("add", "03/04", "1", 5)], "01/20", [("03/04", "1", [5]), ("04/10", "2", [4])]),
    ("insert_and_remove_same_thing",
     [("add", "01/10", "1", 1), ("remove", "01/10", "1", 1), ("add", "01/10", "1", 1)], "01/10",
     [("01/10", "1", [1])]),
    ("overshadowing_chain_removed_from_top",
     [("add", "01/10", "1", 1), ("add", "01/10", "2", 2), ("add", "01/10", "3", 3), ("remove", "01/10", "3", 3)],
     "01/10", [("01/10", "2", [2])]),
]  # fmt: skip


@pytest.mark.parametrize(("name", "ops", "lookup", "want"), SCENARIOS, ids=[s[0] for s in SCENARIOS])
def test_scenario(name, ops, lookup, want) -> None:
    tl: VersionedIntervalTimeline[int] = VersionedIntervalTimeline()
    for op, interval, version, obj in ops:
        (add if op == "add" else remove)(tl, interval, version, obj)
    assert holders(tl, lookup) == expected(*want)


# -- Druid's SpecificData fixture: April and May ----------------------------------------------------


@pytest.fixture
def specific() -> VersionedIntervalTimeline[int]:
    tl: VersionedIntervalTimeline[int] = VersionedIntervalTimeline()
    for interval, version, obj in [
        ("04-01/04-03", "1", 2), ("04-03/04-06", "1", 3), ("04-01/04-09", "2", 1), ("04-06/04-09", "3", 4),
        ("04-01/04-02", "3", 5), ("05-01/05-02", "1", 6), ("05-01/05-05", "2", 7), ("05-03/05-04", "3", 8),
        ("05-01/05-10", "4", 9),
    ]:  # fmt: skip
        add(tl, interval, version, obj)
    return tl


def test_april(specific) -> None:
    assert holders(specific, "04-01/04-09") == expected(
        ("04-01/04-02", "3", [5]), ("04-02/04-06", "2", [1]), ("04-06/04-09", "3", [4])
    )


def test_april2_removal_re_exposes_older_versions(specific) -> None:
    remove(specific, "04-01/04-09", "2", 1)
    assert holders(specific, "04-01/04-09") == expected(
        ("04-01/04-02", "3", [5]),
        ("04-02/04-03", "1", [2]),
        ("04-03/04-06", "1", [3]),
        ("04-06/04-09", "3", [4]),
    )


def test_april3_removal_leaves_a_gap(specific) -> None:
    remove(specific, "04-01/04-09", "2", 1)
    remove(specific, "04-01/04-03", "1", 2)
    assert holders(specific, "04-01/04-09") == expected(
        ("04-01/04-02", "3", [5]), ("04-03/04-06", "1", [3]), ("04-06/04-09", "3", [4])
    )


def test_april4_clipping(specific) -> None:
    remove(specific, "04-01/04-09", "2", 1)
    assert holders(specific, "04-01/04-05") == expected(
        ("04-01/04-02", "3", [5]), ("04-02/04-03", "1", [2]), ("04-03/04-05", "1", [3])
    )
    assert holders(specific, "2011-04-02T18/2011-04-04T01") == expected(
        ("2011-04-02T18/2011-04-03", "1", [2]), ("2011-04-03/2011-04-04T01", "1", [3])
    )


def test_may(specific) -> None:
    assert holders(specific, "05-01/05-09") == expected(("05-01/05-09", "4", [9]))


def test_may2(specific) -> None:
    remove(specific, "05-01/05-10", "4", 9)
    assert holders(specific, "05-01/05-20") == expected(
        ("05-01/05-03", "2", [7]), ("05-03/05-04", "3", [8]), ("05-04/05-05", "2", [7])
    )


def test_may3(specific) -> None:
    remove(specific, "05-01/05-10", "4", 9)
    remove(specific, "05-01/05-05", "2", 7)
    assert holders(specific, "05-01/05-20") == expected(("05-01/05-02", "1", [6]), ("05-03/05-04", "3", [8]))


def test_remove_something_dont_have(specific) -> None:
    assert specific.remove(iv("04-01/04-09"), "1", single(1)) is None
    assert specific.remove(iv("04-01/04-09"), "2", single(99)) is None


def test_find_chunk(specific) -> None:
    assert specific.find_chunk(iv("04-01/04-09"), "2", 0).object == 1
    assert specific.find_chunk(iv("04-02/04-05"), "2", 0).object == 1
    assert specific.find_chunk(iv("04-01/04-09"), "1", 0) is None
    assert specific.find_chunk(iv("04-01/04-09"), "2", 1) is None


# -- partitions -------------------------------------------------------------------------------------


def numbered(p: int, n: int, obj: int) -> NumberedPartitionChunk[int]:
    return NumberedPartitionChunk(p, n, obj)


def test_string_partitioning_two_chunks() -> None:
    tl: VersionedIntervalTimeline[int] = VersionedIntervalTimeline()
    tl.add(iv("01/10"), "1", StringPartitionChunk(None, "m", 0, 1))
    assert holders(tl, "01/10") == []
    tl.add(iv("01/10"), "1", StringPartitionChunk("m", None, 1, 2))
    assert holders(tl, "01/10") == expected(("01/10", "1", [1, 2]))


def test_partial_partition_not_returned_until_complete() -> None:
    tl: VersionedIntervalTimeline[int] = VersionedIntervalTimeline()
    add(tl, "01/10", "5", 1)
    tl.add(iv("01/10"), "6", numbered(0, 3, 60))
    tl.add(iv("01/10"), "6", numbered(1, 3, 61))
    assert holders(tl, "01/10") == expected(("01/10", "5", [1]))
    assert holders(tl, "01/10", incomplete=True) == expected(("01/10", "6", [60, 61]))
    tl.add(iv("01/10"), "6", numbered(2, 3, 62))
    assert holders(tl, "01/10") == expected(("01/10", "6", [60, 61, 62]))


def test_incomplete_partition_does_not_overshadow() -> None:
    tl: VersionedIntervalTimeline[int] = VersionedIntervalTimeline()
    tl.add(iv("01/20"), "1", numbered(0, 1, 10))
    tl.add(iv("05/10"), "2", numbered(1, 2, 21))  # partition 0 of 2 missing
    assert holders(tl, "01/20") == expected(("01/20", "1", [10]))
    assert tl.is_overshadowed(iv("01/20"), "1") is False


def test_remove_partition_makes_incomplete() -> None:
    tl: VersionedIntervalTimeline[int] = VersionedIntervalTimeline()
    tl.add(iv("01/10"), "1", numbered(0, 1, 10))
    tl.add(iv("01/10"), "2", numbered(0, 2, 20))
    tl.add(iv("01/10"), "2", numbered(1, 2, 21))
    assert holders(tl, "01/10") == expected(("01/10", "2", [20, 21]))
    assert tl.remove(iv("01/10"), "2", numbered(1, 2, 21)) is not None
    assert holders(tl, "01/10") == expected(("01/10", "1", [10]))


def test_remove_incomplete_keeps_complete() -> None:
    tl: VersionedIntervalTimeline[int] = VersionedIntervalTimeline()
    tl.add(iv("01/10"), "1", numbered(0, 1, 10))
    tl.add(iv("01/10"), "2", numbered(0, 2, 20))
    tl.add(iv("01/10"), "3", numbered(1, 2, 31))
    assert holders(tl, "01/10") == expected(("01/10", "1", [10]))
    assert holders(tl, "01/10", incomplete=True) == expected(("01/10", "3", [31]))
    tl.remove(iv("01/10"), "3", numbered(1, 2, 31))
    assert holders(tl, "01/10", incomplete=True) == expected(("01/10", "2", [20]))
    assert holders(tl, "01/10") == expected(("01/10", "1", [10]))


def test_numbered_with_zero_core_partitions_is_always_complete() -> None:
    tl: VersionedIntervalTimeline[int] = VersionedIntervalTimeline()
    tl.add(iv("01/10"), "1", numbered(3, 0, 13))
    assert holders(tl, "01/10") == expected(("01/10", "1", [13]))


def test_extra_partitions_beyond_core_are_appended() -> None:
    tl: VersionedIntervalTimeline[int] = VersionedIntervalTimeline()
    for p in (0, 1, 2):  # core 0..1 plus an appended partition 2
        tl.add(iv("01/10"), "1", numbered(p, 2, p))
    assert holders(tl, "01/10") == expected(("01/10", "1", [0, 1, 2]))


def test_linear_and_segment_helpers() -> None:
    from timeline import DataSegment

    tl: VersionedIntervalTimeline[str] = VersionedIntervalTimeline()
    seg = DataSegment(
        "wiki", iv("01/02"), "v1", shard_spec=ShardSpec.from_json({"type": "linear", "partitionNum": 4})
    )
    tl.add_segment(seg, seg.id)
    assert [h.objects for h in tl.lookup(iv("01/02"))] == [[seg.id]]
    assert tl.remove_segment(seg, seg.id) is not None
    assert tl.is_empty()


# -- same-version rules, overshadowing --------------------------------------------------------------


def test_overlap_same_version_throws() -> None:
    tl: VersionedIntervalTimeline[int] = VersionedIntervalTimeline()
    add(tl, "01/10", "1", 1)
    with pytest.raises(OverlappingSameVersionError, match="same version"):
        add(tl, "05/15", "1", 2)


def test_is_overshadowed() -> None:
    tl: VersionedIntervalTimeline[int] = VersionedIntervalTimeline()
    add(tl, "01/05", "2", 1)
    add(tl, "05/10", "3", 2)
    assert tl.is_overshadowed(iv("01/10"), "1")
    assert tl.is_overshadowed(iv("02/04"), "1")
    assert not tl.is_overshadowed(iv("01/10"), "2")  # 01/05 has the same version
    assert not tl.is_overshadowed(iv("01/12"), "1")  # 10/12 not covered
    assert not tl.is_overshadowed(iv("01/05"), "2")
    assert tl.is_overshadowed(iv("05/10"), "2")


def test_is_overshadowed_with_gap() -> None:
    tl: VersionedIntervalTimeline[int] = VersionedIntervalTimeline()
    add(tl, "01/05", "2", 1)
    add(tl, "06/10", "2", 2)
    assert not tl.is_overshadowed(iv("01/10"), "1")


def test_find_fully_overshadowed_same_interval_versions() -> None:
    tl: VersionedIntervalTimeline[int] = VersionedIntervalTimeline()
    add(tl, "01/10", "1", 1)
    add(tl, "01/10", "9", 2)
    add(tl, "01/10", "2", 3)
    add(tl, "01/10", "9", 4)  # duplicate partition 0 of v9: ignored
    over = {(h.true_interval, h.version, tuple(h.objects)) for h in tl.find_fully_overshadowed()}
    assert over == {(iv("01/10"), "1", (1,)), (iv("01/10"), "2", (3,))}
    assert holders(tl, "01/10") == expected(("01/10", "9", [2]))


def test_find_fully_overshadowed_partial_cover_is_not_overshadowed() -> None:
    tl: VersionedIntervalTimeline[int] = VersionedIntervalTimeline()
    add(tl, "01/10", "1", 1)
    add(tl, "01/05", "2", 2)
    assert tl.find_fully_overshadowed() == []
    add(tl, "05/10", "2", 3)
    assert [(h.version, h.objects) for h in tl.find_fully_overshadowed()] == [("1", [1])]


def test_iterate_all_objects_and_non_overshadowed(specific) -> None:
    assert sorted(specific.iterate_all_objects()) == [1, 2, 3, 4, 5, 6, 7, 8, 9]
    assert specific.find_non_overshadowed_objects(iv("04-01/04-09")) == {1, 4, 5}
