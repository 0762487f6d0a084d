"""Rendezvous assignment: checked against counts and set algebra computed independently here."""

from __future__ import annotations

import hashlib
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from historical_service.assignment import assign, assigned_to, owners

SERVERS = [f"10.0.0.{i}:8083" for i in range(1, 6)]
SEGMENTS = [f"wiki_2015-09-{d:02d}_v1_{p}" for d in range(1, 31) for p in range(20)]  # 600 ids


def test_owners_follow_the_blake2b_ranking() -> None:
    def w(server: str, sid: str) -> int:
        return int.from_bytes(hashlib.blake2b(f"{server}\x00{sid}".encode(), digest_size=8).digest(), "big")

    for sid in SEGMENTS[:50]:
        expected = sorted(SERVERS, key=lambda s: w(s, sid), reverse=True)[:2]
        assert owners(sid, SERVERS, 2) == expected


def test_each_segment_gets_r_distinct_owners_and_r_is_capped() -> None:
    table = assign(SEGMENTS, SERVERS, 3)
    assert all(len(set(o)) == 3 for o in table.values())
    assert all(len(o) == 2 for o in assign(SEGMENTS, SERVERS[:2], 5).values())
    with pytest.raises(ValueError):
        owners("x", SERVERS, 0)


def test_load_is_balanced() -> None:
    counts = Counter(o for owners_ in assign(SEGMENTS, SERVERS, 2).values() for o in owners_)
    ideal = len(SEGMENTS) * 2 / len(SERVERS)  # 240
    assert set(counts) == set(SERVERS)
    assert all(abs(c - ideal) < ideal * 0.2 for c in counts.values()), counts


def test_removing_a_node_moves_only_its_segments() -> None:
    before = assign(SEGMENTS, SERVERS, 2)
    gone = SERVERS[2]
    after = assign(SEGMENTS, [s for s in SERVERS if s != gone], 2)
    for sid in SEGMENTS:
        if gone not in before[sid]:
            assert after[sid] == before[sid]
        else:
            kept = [s for s in before[sid] if s != gone]
            assert set(kept) < set(after[sid]) and gone not in after[sid]


def test_adding_a_node_only_takes_segments_for_itself() -> None:
    before = assign(SEGMENTS, SERVERS, 2)
    after = assign(SEGMENTS, [*SERVERS, "10.0.0.9:8083"], 2)
    moved = [sid for sid in SEGMENTS if before[sid] != after[sid]]
    assert moved, "a new node should take some segments"
    assert all("10.0.0.9:8083" in after[sid] for sid in moved)


def test_assigned_to_counts_itself_live_and_matches_assign() -> None:
    me = SERVERS[0]
    table = assign(SEGMENTS, SERVERS, 2)
    assert assigned_to(me, SEGMENTS, SERVERS[1:], 2) == {sid for sid, o in table.items() if me in o}
    assert assigned_to(me, SEGMENTS, [], 2) == set(SEGMENTS)


@given(st.lists(st.text(min_size=1, max_size=12), min_size=1, max_size=8, unique=True), st.integers(1, 4))
def test_order_of_servers_does_not_matter(servers: list[str], r: int) -> None:
    for sid in SEGMENTS[:20]:
        assert owners(sid, servers, r) == owners(sid, list(reversed(servers)), r)


def test_remembered_assignment_equals_a_fresh_one_as_servers_and_segments_change() -> None:
    from historical_service.assignment import Assignment

    me = SERVERS[0]
    remembered = Assignment(me)
    steps = [
        (SEGMENTS, SERVERS),
        (SEGMENTS, SERVERS),  # unchanged: answered from memory
        (SEGMENTS[:100], SERVERS),  # segments dropped
        (SEGMENTS, SERVERS[:3]),  # servers left
        (SEGMENTS[50:], SERVERS[2:]),  # this server absent from the list: counts itself live
        ([*SEGMENTS, "new_segment_1", "new_segment_2"], SERVERS),
    ]
    for segments, servers in steps:
        assert remembered.of(dict.fromkeys(segments, 2), servers) == assigned_to(me, segments, servers, 2)
    # a rule changing a segment's replicas changes its answer, even with the servers unchanged
    one = {sid: 1 for sid in SEGMENTS}
    assert remembered.of(one, SERVERS) == assigned_to(me, SEGMENTS, SERVERS, 1)
    assert remembered.of(dict.fromkeys(SEGMENTS, 0), SERVERS) == set()
