"""Admission control and Druid's query laning (broker_service.admission, broker_service.laning):
caps, lanes refusing at once, the queue served by priority, and slots given back whatever happens."""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from broker_service.admission import Admission, Refusals, _Waiter
from broker_service.laning import (
    LOW,
    Laning,
    LaningConfigError,
    hilo,
    manual,
    parse_lane_flag,
    scheduling_keys,
)
from broker_service.sql_api import refuse_before_planning
from strata.query.errors import InvalidInput, QueryCapacityExceeded


def run(fn: Callable[[], Awaitable[Any]]) -> Any:
    return asyncio.run(asyncio.wait_for(fn(), timeout=10))


async def hold(admission: Admission, release: asyncio.Event, **keys: Any) -> str | None:
    async with admission.admit(**keys) as lane:
        await release.wait()
        return lane


def test_hilo_caps_negative_priorities_in_the_low_lane_at_its_rounded_up_share() -> None:
    laning = hilo(total=10, max_low_percent=25)
    assert laning.limits == {LOW: 3}  # 2.5 rounded up, as Druid rounds
    assert (
        laning.lane_of(-1, None) == LOW and laning.lane_of(0, None) is None and laning.lane_of(5, "x") == "x"
    )
    assert hilo(total=1, max_low_percent=1).limits == {LOW: 1}
    with pytest.raises(LaningConfigError):
        hilo(10, 0)


def test_manual_lanes_take_counts_or_percents_and_refuse_druids_reserved_names() -> None:
    assert manual(20, {"bi": 2, "etl": 5}).limits == {"bi": 2, "etl": 5}
    assert manual(20, {"bi": 10}, limits_are_percent=True).limits == {"bi": 2}
    for lanes, percent in [({}, False), ({"total": 1}, False), ({"default": 1}, False), ({"x": 0}, False),
                           ({"x": 101}, True)]:  # fmt: skip
        with pytest.raises(LaningConfigError):
            manual(20, lanes, percent)
    assert parse_lane_flag("bi=3") == ("bi", 3)
    with pytest.raises(LaningConfigError):
        parse_lane_flag("bi")


def test_context_priority_and_lane_are_checked_as_druid_checks_them() -> None:
    assert scheduling_keys({"priority": -5, "lane": "bi"}) == (-5, "bi")
    assert scheduling_keys({"priority": "7"}) == (7, None) and scheduling_keys(None) == (0, None)
    wrong: list[dict[str, Any]] = [{"priority": "high"}, {"priority": 1.5}, {"priority": True},
                                   {"priority": 2**40}, {"lane": 3}]  # fmt: skip
    for bad in wrong:
        with pytest.raises(InvalidInput):
            scheduling_keys(bad)


def test_a_full_lane_refuses_at_once_with_druids_message_while_other_work_runs() -> None:
    async def scenario() -> None:
        admission = Admission(max_concurrent=4, max_queued=10, laning=hilo(4, 25))
        release = asyncio.Event()
        low = asyncio.create_task(hold(admission, release, priority=-1))
        await asyncio.sleep(0)
        assert admission.lane_running[LOW] == 1
        with pytest.raises(QueryCapacityExceeded) as refused:
            async with admission.admit(priority=-3):
                pass
        assert refused.value.status == 429 and refused.value.error_message == (
            "Too many concurrent queries for lane 'low', query capacity of 1 exceeded. "
            "Please try your query again later."
        )
        async with admission.admit(priority=0) as lane:  # interactive work is not held up
            assert lane is None and admission.running == 2
        release.set()
        assert await low == LOW
        assert admission.running == 0 and admission.lane_running[LOW] == 0

    run(scenario)


def test_check_refuses_as_admission_would_now_and_takes_nothing() -> None:
    async def scenario() -> None:
        admission = Admission(max_concurrent=2, max_queued=1, laning=hilo(2, 50))
        admission.check(priority=-1)  # room everywhere
        release = asyncio.Event()
        low = asyncio.create_task(hold(admission, release, priority=-1))
        await asyncio.sleep(0)
        with pytest.raises(QueryCapacityExceeded, match="for lane 'low', query capacity of 1"):
            admission.check(priority=-2)
        admission.check(priority=0)  # no lane: a slot is free
        other = asyncio.create_task(hold(admission, release))
        await asyncio.sleep(0)
        admission.check(priority=0)  # every slot taken, the queue has room
        queued = asyncio.create_task(hold(admission, release))
        await asyncio.sleep(0)
        with pytest.raises(QueryCapacityExceeded, match="total query capacity of 2"):
            admission.check(priority=5)
        assert (admission.running, admission.queued, admission.lane_running[LOW]) == (2, 1, 1)
        release.set()
        await asyncio.gather(low, other, queued)
        assert (admission.running, admission.queued, admission.lane_running[LOW]) == (0, 0, 0)

    run(scenario)


def test_the_queue_serves_the_highest_priority_first_and_refuses_past_its_length() -> None:
    async def scenario() -> None:
        admission = Admission(max_concurrent=1, max_queued=3)
        release = asyncio.Event()
        first = asyncio.create_task(hold(admission, release))
        await asyncio.sleep(0)
        order: list[int] = []

        async def queued(priority: int) -> None:
            async with admission.admit(priority=priority):
                order.append(priority)

        waiting = [asyncio.create_task(queued(p)) for p in (0, 10, -5)]
        await asyncio.sleep(0.01)
        assert admission.queued == 3
        with pytest.raises(QueryCapacityExceeded, match="total query capacity of 1 exceeded"):
            async with admission.admit(priority=100):
                pass
        release.set()
        await first
        await asyncio.gather(*waiting)
        assert order == [10, 0, -5]
        assert admission.running == 0 and admission.queued == 0

    run(scenario)


def test_a_waiter_cancelled_in_the_queue_takes_no_slot_with_it() -> None:
    async def scenario() -> None:
        admission = Admission(max_concurrent=1, max_queued=5, laning=Laning("manual", {"bi": 2}))
        release = asyncio.Event()
        first = asyncio.create_task(hold(admission, release))
        await asyncio.sleep(0)
        gone = asyncio.create_task(hold(admission, asyncio.Event(), lane="bi"))
        await asyncio.sleep(0.01)
        assert admission.queued == 1 and admission.lane_running["bi"] == 1
        gone.cancel()
        with pytest.raises(asyncio.CancelledError):
            await gone
        assert admission.queued == 0 and admission.lane_running["bi"] == 0
        release.set()
        await first
        assert admission.running == 0
        async with admission.admit(lane="bi"):  # the capacity is all there
            assert admission.running == 1

    run(scenario)


def test_a_slot_handed_to_a_waiter_cancelled_at_that_moment_passes_on() -> None:
    async def scenario() -> None:
        admission = Admission(max_concurrent=1, max_queued=5)
        release = asyncio.Event()
        first = asyncio.create_task(hold(admission, release))
        await asyncio.sleep(0)
        unlucky = asyncio.create_task(hold(admission, asyncio.Event()))
        await asyncio.sleep(0.01)
        later_release = asyncio.Event()
        later = asyncio.create_task(hold(admission, later_release))
        await asyncio.sleep(0.01)
        release.set()
        await asyncio.sleep(0)  # the slot is handed to `unlucky`, which has not resumed yet
        unlucky.cancel()
        await first
        with pytest.raises(asyncio.CancelledError):
            await unlucky
        later_release.set()
        await later
        assert admission.running == 0 and admission.queued == 0

    run(scenario)


def test_a_failing_query_gives_its_slots_back() -> None:
    async def scenario() -> None:
        admission = Admission(max_concurrent=2, max_queued=0, laning=Laning("manual", {"bi": 1}))
        with pytest.raises(RuntimeError):
            async with admission.admit(lane="bi"):
                raise RuntimeError("the query failed")
        assert admission.running == 0 and admission.lane_running["bi"] == 0
        assert admission.lanes() == {"bi": {"running": 0, "limit": 1}}

    run(scenario)


def test_a_statement_whose_set_statements_follow_a_comment_is_planned_before_it_is_judged() -> None:
    """SET statements may move a statement to another lane: one that has them is not refused on its
    request's context alone, whatever blanks and comments come before them; one without them is."""

    async def scenario() -> None:
        admission = Admission(max_concurrent=4, max_queued=0, laning=hilo(4, 25))
        release = asyncio.Event()
        low = asyncio.create_task(hold(admission, release, priority=-1))
        await asyncio.sleep(0)
        low_context = {"priority": -1}
        moved = [
            "SET priority = 0; SELECT 1",
            "/* c */ SET priority = 0; SELECT 1",
            "-- c\nSET priority = 0;\nSELECT 1",
            "/* a; b */ -- c\n  /* multi\nline */set priority=0; SELECT 1",
            "\n\t SET\tpriority = 0; SELECT 1",
        ]
        for sql in moved:
            refuse_before_planning(admission, sql, low_context)
        judged = [
            "SELECT 1",
            "/* SET priority = 0; */ SELECT 1",
            "-- SET priority = 0;\nSELECT 1",
            "SELECT 'x; SET priority = 0' AS s",
            "SETTINGS",
            "/* unclosed SET priority = 0; SELECT 1",
            "-" * 100_000 + "\nSELECT 1",  # long comments and blanks are passed once
            " " * 100_000 + "/**/" * 10_000 + "SELECT 1",
        ]
        for sql in judged:
            with pytest.raises(QueryCapacityExceeded, match="lane 'low'"):
                refuse_before_planning(admission, sql, low_context)
        release.set()
        await low

    run(scenario)


def test_check_refuses_exactly_when_admit_would_refuse_at_once() -> None:
    """Over every small state of the lanes, the total and the queue: `check` raises the 429 that
    `admit` raises on arrival (a query `admit` would queue is not refused by `check`)."""

    async def outcome(admission: Admission, priority: int, lane: str | None) -> str:
        try:
            async with asyncio.timeout(0.01):
                async with admission.admit(priority=priority, lane=lane):
                    return "ran"
        except QueryCapacityExceeded as e:
            return e.error_message
        except TimeoutError:
            return "queued"

    async def scenario() -> None:
        laning = Laning("manual", {"bi": 1, LOW: 1})
        for running, bi, queued, max_queued in itertools.product(range(3), range(2), range(2), range(2)):
            if bi > running or queued > max_queued:
                continue
            for priority, lane in [(0, None), (-1, "bi"), (5, "bi"), (0, "other")]:
                admission = Admission(max_concurrent=2, max_queued=max_queued, laning=laning)
                admission.running, admission.lane_running["bi"] = running, bi
                loop = asyncio.get_running_loop()
                admission._waiting = [_Waiter((0, i), loop.create_future()) for i in range(queued)]
                try:
                    admission.check(priority=priority, lane=lane)
                    checked = "ok"
                except QueryCapacityExceeded as e:
                    checked = e.error_message
                got = await outcome(admission, priority, lane)
                state = (running, bi, queued, max_queued, priority, lane)
                assert checked == got if checked != "ok" else got in ("ran", "queued"), (state, checked, got)

    run(scenario)


def test_refusals_are_counted_per_lane_and_logged_a_line_a_minute_at_most(
    caplog: pytest.LogCaptureFixture,
) -> None:
    now = [0.0]
    refusals = Refusals(log_every_s=60, clock=lambda: now[0])
    with caplog.at_level(logging.WARNING, logger="broker_service.admission"):
        for at, lane in [(0, LOW), (1, LOW), (2, "total"), (30, LOW), (61, "bi"), (62, LOW)]:
            now[0] = at
            refusals.count(lane)
    assert refusals.by_lane == {LOW: 4, "total": 1, "bi": 1}
    assert [r.getMessage() for r in caplog.records] == [
        "refused 1 queries with 429 (query capacity exceeded): 1 in lane 'low'",
        "refused 4 queries with 429 (query capacity exceeded) in the last 61 s: 2 in lane 'low', "
        "1 of the total, 1 in lane 'bi'",
    ]
