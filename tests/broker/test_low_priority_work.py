"""A low-priority query's Python work in the broker (its partials decoded and merged, its SQL
planned) runs on threads of its own (strata.server.priority_threads) at nice 10 unless the broker
sets another value, a query of priority 0 or up where it ran before; against fake data nodes on
real ports."""

from __future__ import annotations

import asyncio
import contextvars
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import pytest

import broker_service.data_node_client as data_node_client
import broker_service.merging as merging_module
import broker_service.query_runner as query_runner
from broker_service.sql_planning import PlanningPools
from strata.server.priority_threads import low_priority_executor, run_for_priority, set_low_priority_nice
from strata.server.thread_priority import LOW_NICE
from strata.wire import decode_partials as decode
from tests.broker.helpers import run, sum_query
from tests.broker.test_query_runner import DAYS, WEEK, Cluster, oracle

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="per-thread nice values are Linux's")

WHO = contextvars.ContextVar("who", default="nobody")


@pytest.fixture(autouse=True)
def low_nice() -> Iterator[None]:
    yield
    set_low_priority_nice(LOW_NICE)  # the default again, whatever a test set


def nice_here() -> int:
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


def test_work_of_a_negative_priority_runs_at_nice_10_in_the_callers_context() -> None:
    own = nice_here()
    assert own < LOW_NICE

    def where() -> tuple[int, str, str]:
        return nice_here(), threading.current_thread().name, WHO.get()

    async def main() -> None:
        WHO.set("caller")
        nice, name, who = await run_for_priority(-1, where)
        assert (nice, who) == (LOW_NICE, "caller") and name.startswith("low-priority")
        nice, name, who = await run_for_priority(0, where)
        assert (nice, who) == (own, "caller") and not name.startswith("low-priority")
        nice, name, who = await run_for_priority(7, where)
        assert (nice, who) == (own, "caller") and not name.startswith("low-priority")

    asyncio.run(asyncio.wait_for(main(), timeout=30))
    assert nice_here() == own  # the caller's thread unchanged


def test_a_low_priority_querys_partials_are_decoded_and_merged_at_nice_10(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: dict[str, list[int]] = {"decode": [], "merge": []}
    merge = merging_module.merge_and_finalize

    def decoding(payload: bytes) -> Any:
        seen["decode"].append(nice_here())
        return decode(payload)

    def merging(*args: Any) -> Any:
        seen["merge"].append(nice_here())
        return merge(*args)

    # every answer decoded and merged off the loop, as a large one is
    monkeypatch.setattr(data_node_client, "DECODE_IN_THREAD_BYTES", 0)
    monkeypatch.setattr(data_node_client, "decode_partials", decoding)
    monkeypatch.setattr(query_runner, "INLINE_MERGE_ROWS", -1)
    monkeypatch.setattr(query_runner, "merge_and_finalize", merging)
    own = nice_here()
    with ExitStack() as stack:
        c = Cluster(stack)
        c.node(serves=DAYS[:3])
        c.node(serves=DAYS[3:])
        runner = c.runner()

        async def both() -> tuple[dict[str, list[int]], dict[str, list[int]]]:
            try:
                assert (await runner.run(sum_query(WEEK, priority=-1))).results == [oracle(DAYS)]
                low = {k: list(v) for k, v in seen.items()}
                for v in seen.values():
                    v.clear()
                assert (await runner.run(sum_query(WEEK))).results == [oracle(DAYS)]
                return low, seen
            finally:
                await runner.client.close()

        low, normal = run(asyncio.wait_for(both(), timeout=60))
        assert low == {"decode": [LOW_NICE, LOW_NICE], "merge": [LOW_NICE]}
        assert normal == {"decode": [own, own], "merge": [own]}


def test_a_low_priority_statement_plans_on_the_low_priority_threads() -> None:
    async def main() -> None:
        pools = PlanningPools()
        try:
            assert pools.budget("SELECT 1", -1).pool is low_priority_executor()
            assert pools.budget("SELECT 1", 0).pool is pools.small
            assert pools.budget("SELECT 1").pool is pools.small
            nice = await pools.budget("SELECT 1", -1).run(nice_here)
            assert nice == LOW_NICE
        finally:
            pools.small.shutdown()
            pools.large.shutdown()

    asyncio.run(asyncio.wait_for(main(), timeout=30))


def test_the_low_priority_threads_nice_value_is_the_brokers_to_set() -> None:
    def where() -> tuple[int, str]:
        return nice_here(), threading.current_thread().name

    async def main() -> list[tuple[int, str]]:
        return [await run_for_priority(-1, where)]

    set_low_priority_nice(5)
    [(five, name)] = asyncio.run(asyncio.wait_for(main(), timeout=30))
    set_low_priority_nice(0)  # apart from the other pools all the same
    [(zero, apart)] = asyncio.run(asyncio.wait_for(main(), timeout=30))
    assert (five, zero) == (5, nice_here())
    assert name.startswith("low-priority") and apart.startswith("low-priority")
