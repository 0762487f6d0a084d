"""SharedReads (cache.shared_reads): concurrent reads of a key share round trips, and none is
answered by a read that left before it began. Pure asyncio: the "server" is a counter whose reads
come back when the test opens their gate, so the order of events is the test's, not the clock's."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from cache.shared_reads import SharedReads

pytestmark = pytest.mark.timeout(30)


class Server:
    """Each read notes the value when it leaves and comes back when its gate opens."""

    def __init__(self) -> None:
        self.value = 0
        self.gates: list[asyncio.Event] = []
        self.deadlines: list[float] = []
        self.failing: set[int] = set()  # reads (by number) that fail
        self.left = asyncio.Condition()

    async def read(self, deadline: float) -> int:
        number, seen = len(self.gates), self.value
        gate = asyncio.Event()
        self.gates.append(gate)
        self.deadlines.append(deadline)
        async with self.left:
            self.left.notify_all()
        await gate.wait()
        if number in self.failing:
            raise ConnectionResetError("gone")
        return seen

    async def on_wire(self, n: int) -> None:
        """Until the n-th read has left."""
        async with self.left:
            await self.left.wait_for(lambda: len(self.gates) >= n)

    def back(self, n: int) -> None:
        self.gates[n - 1].set()


async def turns(n: int = 5) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


def started(
    shared: SharedReads[int], server: Server, count: int, key: str = "k", deadline: float = 1e18
) -> list[asyncio.Task[Any]]:
    return [asyncio.create_task(shared.read(key, server.read, deadline)) for _ in range(count)]


def test_a_lone_read_runs_its_own_and_leaves_nothing_behind():
    shared: SharedReads[int] = SharedReads()
    server = Server()

    async def run() -> tuple[int, bool]:
        [task] = started(shared, server, 1)
        await server.on_wire(1)
        server.back(1)
        return await task

    assert asyncio.run(run()) == (0, True)
    assert len(server.gates) == 1 and shared._lines == {}


def test_reads_asked_in_the_same_turn_board_one_read():
    shared: SharedReads[int] = SharedReads()
    server = Server()

    async def run() -> list[tuple[int, bool]]:
        tasks = started(shared, server, 10)  # a burst: the loop runs them all in one turn
        await server.on_wire(1)
        server.back(1)
        return list(await asyncio.gather(*tasks))

    answers = asyncio.run(run())
    assert len(server.gates) == 1
    assert answers == [(0, True)] + [(0, False)] * 9
    assert shared._lines == {}


def test_reads_arriving_while_one_is_on_the_wire_share_the_next_never_the_one_before():
    shared: SharedReads[int] = SharedReads()
    server = Server()

    async def run() -> list[tuple[int, bool]]:
        [first] = started(shared, server, 1)
        await server.on_wire(1)
        server.value = 1  # a write the later reads must see
        later = started(shared, server, 20)
        [other] = started(shared, server, 1, key="other key")
        await turns()
        assert len(server.gates) == 2  # the first and the other key's; the later ones wait
        server.back(1)
        await server.on_wire(3)
        server.back(2)
        server.back(3)
        return [await first, *[await t for t in later], await other]

    first, *later, other = asyncio.run(run())
    assert first == (0, True)
    assert later == [(1, False)] * 20  # none answered by the read that left before them
    assert other == (1, True)
    assert len(server.gates) == 3  # the first, the other key's, the one shared by the later ones
    assert shared._lines == {}


def test_a_cancelled_caller_leaves_the_others_served():
    shared: SharedReads[int] = SharedReads()
    server = Server()

    async def run() -> list[tuple[int, bool]]:
        [leader] = started(shared, server, 1)
        await server.on_wire(1)
        waiters = started(shared, server, 3)
        await turns()
        leader.cancel()
        waiters[0].cancel()
        await server.on_wire(2)  # the next read leaves for the two still waiting
        server.back(2)
        with pytest.raises(asyncio.CancelledError):
            await leader
        return [await task for task in waiters[1:]]

    assert asyncio.run(run()) == [(0, False), (0, False)]
    assert shared._lines == {}


def test_a_cancelled_leader_hands_those_on_board_to_the_next_read():
    shared: SharedReads[int] = SharedReads()
    server = Server()

    async def run() -> list[tuple[int, bool]]:
        leader, *boarded = started(shared, server, 3)
        await turns(1)  # the leader yields its turn; the others board
        leader.cancel()
        await server.on_wire(1)
        server.back(1)
        return [await task for task in boarded]

    assert asyncio.run(run()) == [(0, False), (0, False)]
    assert shared._lines == {}


def test_a_failed_read_fails_only_those_it_served():
    shared: SharedReads[int] = SharedReads()
    server = Server()
    server.failing.add(1)  # the second read, the one the waiters share

    async def run() -> tuple[list[Any], Any]:
        [leader] = started(shared, server, 1)
        await server.on_wire(1)
        waiters = started(shared, server, 3)
        await turns()
        server.back(1)
        await server.on_wire(2)
        server.back(2)
        results = await asyncio.gather(*waiters, return_exceptions=True)
        [after] = started(shared, server, 1)
        await server.on_wire(3)
        server.back(3)
        return [await leader, *results], await after

    results, after = asyncio.run(run())
    assert results[0] == (0, True)
    assert all(isinstance(r, ConnectionResetError) for r in results[1:])
    assert after == (0, True)
    assert shared._lines == {}


def test_the_shared_read_has_the_earliest_deadline_of_those_it_serves():
    shared: SharedReads[int] = SharedReads()
    server = Server()

    async def run() -> None:
        [leader] = started(shared, server, 1, deadline=100.0)
        await server.on_wire(1)
        waiters = [t for d in (30.0, 20.0, 40.0) for t in started(shared, server, 1, deadline=d)]
        await turns()
        server.back(1)
        await server.on_wire(2)
        server.back(2)
        await asyncio.gather(leader, *waiters)

    asyncio.run(run())
    assert server.deadlines == [100.0, 20.0]
