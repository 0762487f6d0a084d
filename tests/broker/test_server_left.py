"""A data server that leaves the cluster while a query waits on it (a host cut off the network
answers nothing, so only its vanished announcement tells): the wait ends at once and its segments
are read from a replica; the query neither fails nor waits for its timeout."""

from __future__ import annotations

import asyncio
import time
from contextlib import ExitStack

import pytest

from broker_service.inflight import InflightCalls, ServerLeft
from tests.broker.helpers import run, sum_query
from tests.broker.test_query_runner import DAYS, WEEK, Cluster, oracle


def test_a_server_leaving_mid_query_costs_a_retry_on_the_replica_not_the_query() -> None:
    with ExitStack() as stack:
        c = Cluster(stack)
        gone, a = c.node(serves=DAYS, tier_priority=5)  # preferred, then silent
        a.delay_s = 60
        _, b = c.node(serves=DAYS)

        async def main() -> tuple[object, float]:
            runner = c.runner()
            task = asyncio.create_task(runner.run(sum_query(WEEK, timeout=30_000)))
            for _ in range(500):
                if a.requests:
                    break
                await asyncio.sleep(0.01)
            assert c.view.inflight.count(gone.name) == 1
            began = time.monotonic()
            c.view.remove_server(gone.name)  # its ZooKeeper session expired
            result = await task
            return result, time.monotonic() - began

        result, waited = run(main())
        assert result.results == [oracle(DAYS)]
        assert waited < 5 and len(b.requests) == 1
        assert c.view.inflight.count(gone.name) == 0


def test_inflight_calls_tell_a_left_server_from_a_cancelled_caller() -> None:
    async def main() -> None:
        calls = InflightCalls()
        waiting = asyncio.create_task(calls.run("a:1", asyncio.sleep(60)))
        await asyncio.sleep(0)
        assert calls.cancel_server("a:1") == 1
        with pytest.raises(ServerLeft):
            await waiting
        caller = asyncio.create_task(calls.run("a:1", asyncio.sleep(60)))
        await asyncio.sleep(0)
        caller.cancel()  # the query's own timeout or cancel: not the server's leaving
        with pytest.raises(asyncio.CancelledError):
            await caller
        assert calls.count("a:1") == 0 and calls.cancel_server("a:1") == 0
        assert await calls.run("b:2", asyncio.sleep(0, result=7)) == 7

    run(main())
