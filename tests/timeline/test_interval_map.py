"""IntervalMap against a plain sorted list of (interval, value) pairs, with blocks of two rows so
that every sequence splits, empties and straddles blocks (equal starts across a block boundary)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.timeline import test_timeline_properties
from timeline import Interval, interval_map
from timeline.interval_map import IntervalMap

ops = st.lists(
    st.tuples(st.sampled_from(["set", "set", "pop"]), st.integers(0, 30), st.integers(0, 4)),
    max_size=80,
)
probe = st.tuples(st.integers(-2, 36), st.integers(0, 8))


@pytest.fixture(autouse=True)
def tiny_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(interval_map, "_LOAD", 1)


class Oracle:
    def __init__(self) -> None:
        self.rows: dict[Interval, int] = {}

    def ordered(self) -> list[tuple[Interval, int]]:
        return sorted(self.rows.items())


@settings(max_examples=300, deadline=None)
@given(ops, st.lists(probe, min_size=1, max_size=10))
def test_random_operations_match_a_sorted_list(
    sequence: list[tuple[str, int, int]], probes: list[tuple[int, int]]
) -> None:
    m: IntervalMap[int] = IntervalMap()
    oracle = Oracle()
    for n, (kind, start, length) in enumerate(sequence):
        key = Interval(start, start + length)
        if kind == "set":
            m.set(key, n)
            oracle.rows[key] = n
        else:
            assert m.pop(key) == oracle.rows.pop(key, None)
        assert list(m.items()) == oracle.ordered()
        assert len(m) == len(oracle.rows)
    rows = oracle.ordered()
    keys = [k for k, _ in rows]
    for start, length in probes:
        key = Interval(start, start + length)
        assert m.get(key) == oracle.rows.get(key)
        assert (key in m) == (key in oracle.rows)
        assert m.lower_key(key) == max((k for k in keys if k < key), default=None)
        assert m.higher_key(key) == min((k for k in keys if k > key), default=None)
        low, high = start, start + length
        within = [(k, v) for k, v in rows if low <= k.start < high]
        assert m.starting_in(low, high) == ([k for k, _ in within], [v for _, v in within])
        at_or_before = [i for i, k in enumerate(keys) if k.start <= start]
        first = at_or_before[-1] if at_or_before else 0
        assert list(m.rows_from(start)) == rows[first:]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 40), st.integers(1, 3)), max_size=60), probe)
def test_overlapping_over_disjoint_keys(
    sequence: list[tuple[bool, int, int]], query: tuple[int, int]
) -> None:
    """What a visible map holds: pieces that never overlap, with gaps between some."""
    m: IntervalMap[int] = IntervalMap()
    oracle: dict[Interval, int] = {}
    for n, (add, start, length) in enumerate(sequence):
        key = Interval(start, start + length)
        if add and not any(k.overlaps(key) for k in oracle):
            m.set(key, n)
            oracle[key] = n
        elif not add:
            for k in [k for k in oracle if k.start == start]:
                assert m.pop(k) == oracle.pop(k)
    interval = Interval(query[0], query[0] + query[1])
    want = sorted((k, v) for k, v in oracle.items() if k.overlaps(interval))
    if interval.start < interval.end:
        assert m.overlapping(interval) == ([k for k, _ in want], [v for _, v in want])


def test_the_timeline_matches_its_oracle_over_tiny_blocks() -> None:
    """The timeline's own random add/remove test, each of its maps split into blocks of two."""
    test_timeline_properties.test_random_adds_and_removes_match_the_oracle()


def test_a_block_whose_first_row_left_is_found_by_its_new_first() -> None:
    m: IntervalMap[int] = IntervalMap()
    for start in range(0, 12, 2):
        m.set(Interval(start, start + 1), start)  # blocks split at three rows: [0] [2] [4] [6] [8, 10]
    m.pop(Interval(8, 9))
    assert [k.start for k, _ in m.rows_from(9)] == [6, 10]
    assert m.lower_key(Interval(9, 10)) == Interval(6, 7)
    m.set(Interval(9, 10), 9)
    assert [k.start for k, _ in m.items()] == [0, 2, 4, 6, 9, 10]
