"""What the coordinator makes of a submitted task before running it: its id, data source, the
intervals it locks and the lock's type and priority, as Druid decides them; bad tasks refused."""

from __future__ import annotations

import pytest

from strata.coordinator import task_registry  # noqa: F401  (registers the task types)
from strata.coordinator.task_types import InvalidTask, accept, check_id
from timeline import ETERNITY, Interval, parse_instant

NOW = parse_instant("2024-05-06T07:08:09.010Z")


def index(intervals=None, append=False, granularity="day", context=None, **top):
    granularity_spec = {"segmentGranularity": granularity, **({"intervals": intervals} if intervals else {})}
    return {
        "type": "index_parallel",
        "spec": {
            "dataSchema": {"dataSource": "wiki", "timestampSpec": {"column": "ts"}, "granularitySpec": granularity_spec},
            "ioConfig": {"inputSource": {"type": "inline", "data": "{}"}, "inputFormat": {"type": "json"},
                         "appendToExisting": append},
        },
        **({"context": context} if context is not None else {}),
        **top,
    }  # fmt: skip


def test_an_index_task_gets_druids_id_and_locks_its_whole_chunks() -> None:
    sub = accept(
        index(["2020-01-01T06:00:00Z/2020-01-02T03:00:00Z", "2020-01-05/2020-01-06"]), NOW, "abcdefgh"
    )
    assert sub.id == "index_parallel_wiki_abcdefgh_2024-05-06T07:08:09.010Z" == sub.group_id
    assert (sub.type, sub.data_source) == ("index_parallel", "wiki")
    assert sub.lock.intervals == (
        Interval.parse("2020-01-01/2020-01-03"),
        Interval.parse("2020-01-05/2020-01-06"),
    )
    assert (sub.lock.lock_type, sub.lock.priority, sub.lock_timeout_ms) == ("EXCLUSIVE", 50, None)
    assert (
        sub.payload["id"] == sub.id and sub.payload["dataSource"] == "wiki" and sub.payload["context"] == {}
    )


def test_without_intervals_a_task_locks_the_whole_timeline() -> None:
    assert accept(index(), NOW).lock.intervals == (ETERNITY,)


@pytest.mark.parametrize(
    ("append", "context", "expected"),
    [
        (False, {}, "EXCLUSIVE"),
        (True, {}, "EXCLUSIVE"),  # Druid's default for appends too
        (True, {"useSharedLock": True}, "SHARED"),
        (False, {"useSharedLock": True}, "EXCLUSIVE"),  # shared locks are for appends
        (True, {"useConcurrentLocks": "true"}, "APPEND"),
        (False, {"useConcurrentLocks": True}, "REPLACE"),
        (False, {"taskLockType": "append", "useConcurrentLocks": True}, "APPEND"),  # the explicit type wins
    ],
)
def test_the_lock_type_follows_druids_context_flags(append: bool, context: dict, expected: str) -> None:
    assert accept(index(["2020/2021"], append=append, context=context), NOW).lock.lock_type == expected


def test_given_ids_priority_and_lock_timeout_are_kept() -> None:
    sub = accept(index(id="mine", groupId="g", context={"priority": "75", "taskLockTimeout": 1000}), NOW)
    assert (sub.id, sub.group_id, sub.lock.group_id, sub.lock.priority, sub.lock_timeout_ms) == (
        "mine", "g", "g", 75, 1000)  # fmt: skip


def test_a_kill_task_locks_its_interval() -> None:
    sub = accept({"type": "kill", "dataSource": "wiki", "interval": "2020-01-01_2020-01-03"}, NOW, "zzzzzzzz")
    assert sub.id == ("kill_wiki_zzzzzzzz_2020-01-01T00:00:00.000Z_2020-01-03T00:00:00.000Z_"
                      "2024-05-06T07:08:09.010Z")  # fmt: skip
    assert (sub.lock.intervals, sub.lock.lock_type, sub.lock.priority) == (
        (Interval.parse("2020-01-01/2020-01-03"),), "EXCLUSIVE", 0)  # fmt: skip


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ([1, 2], "must be a JSON object"),
        ({"spec": {}}, "needs a 'type'"),
        ({"type": "index_hadoop"}, "task type [index_hadoop] is not supported"),
        (index() | {"spec": {"dataSchema": {}}}, "dataSource"),
        ({"type": "kill", "dataSource": "w"}, "needs 'interval'"),
        ({"type": "kill", "dataSource": "w", "interval": "yesterday"}, "Invalid value for field [interval]"),
        (
            {"type": "kill", "dataSource": "w", "interval": "2020/2021", "limit": 0},
            "'limit' must be a positive",
        ),
        (
            {"type": "kill", "dataSource": "w", "interval": "2020/2021", "versions": "v1"},
            "'versions' must be a list",
        ),
        (index(id="a/b"), "cannot contain '/'"),
        (index(context={"taskLockType": "BIG"}), "must be one of EXCLUSIVE"),
        (index(context={"priority": "high"}), "context.priority must be an integer"),
        (index(context=[]), "context must be a JSON object"),
    ],
)
def test_tasks_that_cannot_run_are_refused_saying_why(body: object, message: str) -> None:
    with pytest.raises(
        InvalidTask, match=message.replace("[", r"\[").replace("]", r"\]").replace("(", r"\(")
    ):
        accept(body, NOW)


@pytest.mark.parametrize("bad", ["", ".hidden", "a\tb", "a\nb", "x" * 256])
def test_ids_follow_druids_rules(bad: str) -> None:
    with pytest.raises(InvalidTask):
        check_id(bad)
    assert check_id("index parallel_ok-1:2") == "index parallel_ok-1:2"
