"""Druid's lock compatibility (TaskLockbox; docs/ingestion/concurrent-append-replace.md), written out
as a table here apart from strata.coordinator.locks, and checked for every pair of lock types and
every relation of two intervals."""

from __future__ import annotations

import itertools

import pytest

from strata.coordinator.locks import LOCK_TYPES, LockRequest, coexist, conflicting
from timeline import Interval

DAY = Interval.parse("2020-01-01/2020-01-02")
RELATIONS = {
    "apart": Interval.parse("2020-01-05/2020-01-06"),
    "abutting": Interval.parse("2020-01-02/2020-01-03"),
    "inside": Interval.parse("2020-01-01T06:00:00Z/2020-01-01T12:00:00Z"),
    "enclosing": Interval.parse("2019-12-31/2020-01-03"),
    "same": DAY,
    "straddling": Interval.parse("2020-01-01T12:00:00Z/2020-01-02T12:00:00Z"),
}


def druid_says(held: str, held_iv: Interval, asked: str, asked_iv: Interval) -> bool:
    """The rule as Druid's docs state it, case by case."""
    if not (held_iv.start < asked_iv.end and asked_iv.start < held_iv.end):
        return True  # locks on intervals that do not overlap never conflict
    pair = (held, asked)
    if "EXCLUSIVE" in pair:
        return False  # "EXCLUSIVE shares with nothing"
    if pair == ("SHARED", "SHARED"):
        return True
    if pair == ("APPEND", "APPEND"):
        return True  # "Multiple tasks can hold APPEND locks on a given interval"
    if pair == ("REPLACE", "APPEND"):
        return (
            held_iv.start <= asked_iv.start and asked_iv.end <= held_iv.end
        )  # the replace encloses the append
    if pair == ("APPEND", "REPLACE"):
        return asked_iv.start <= held_iv.start and held_iv.end <= asked_iv.end
    return False  # "Only a single task can hold a REPLACE lock"; SHARED with APPEND/REPLACE


@pytest.mark.parametrize(("held", "asked"), list(itertools.product(LOCK_TYPES, repeat=2)))
@pytest.mark.parametrize("relation", sorted(RELATIONS))
def test_coexistence_is_druids(held: str, asked: str, relation: str) -> None:
    other = RELATIONS[relation]
    assert coexist(held, DAY, asked, other) == druid_says(held, DAY, asked, other)
    assert coexist(asked, other, held, DAY) == druid_says(held, DAY, asked, other)  # symmetric


def request(kind: str, interval: Interval, group: str = "g2") -> LockRequest:
    return LockRequest("w", (interval,), kind, group, 50)


def held(kind: str, interval: Interval, group: str = "g1", revoked: bool = False) -> dict:
    return request(kind, interval, group).payloads("v1")[0] | {"revoked": revoked}


def test_a_task_group_shares_its_locks_and_revoked_locks_are_in_no_ones_way() -> None:
    locks = [held("EXCLUSIVE", DAY, group="g2"), held("EXCLUSIVE", DAY, revoked=True)]
    assert conflicting(request("EXCLUSIVE", DAY), locks) == []
    blocking = held("EXCLUSIVE", RELATIONS["straddling"])
    assert conflicting(request("EXCLUSIVE", DAY), [*locks, blocking]) == [blocking]


def test_the_lock_json_is_druids_time_chunk_lock() -> None:
    payload = LockRequest("w", (DAY,), "REPLACE", "grp", 25).payloads("2024-01-01T00:00:00.000Z")[0]
    assert payload == {
        "type": "timeChunk", "granularity": "timeChunk", "lockType": "REPLACE", "groupId": "grp",
        "dataSource": "w", "interval": "2020-01-01T00:00:00.000Z/2020-01-02T00:00:00.000Z",
        "version": "2024-01-01T00:00:00.000Z", "priority": 25, "revoked": False,
    }  # fmt: skip
