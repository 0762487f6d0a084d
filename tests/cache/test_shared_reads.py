"""SharedReads (cache.shared_reads): concurrent reads of a key share round trips, and none is
answered by a read that left before it began. Pure asyncio: the "server" is a counter."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from cache.shared_reads import SharedReads

pytestmark = pytest.mark.timeout(30)


class Server:
    """Each read notes when it left (the value then written) and comes back after `delay`."""

    def __init__(self, delay: float = 0.01):
        self.delay = delay
        self.value = 0
        self.reads = 0
        self.fail_next = False

    async def read(self, deadline: float) -> int:
        self.reads += 1
        seen = self.value
        if self.fail_next:
            self.fail_next = False
            await asyncio.sleep(self.delay)
            raise ConnectionResetError("gone")
        await asyncio.sleep(self.delay)
        return seen


def test_a_lone_read_runs_its_own_and_leaves_nothing_behind():
    shared: SharedReads[int] = SharedReads()
    server = Server()

    async def run() -> tuple[int, bool]:
        return await shared.read("k", server.read, 1e18)

    assert asyncio.run(run()) == (0, True)
    assert server.reads == 1 and shared._lines == {}


def test_reads_arriving_while_one_is_on_the_wire_share_the_next_never_the_one_before():
    shared: SharedReads[int] = SharedReads()
    server = Server()

    async def run() -> list[tuple[int, bool]]:
        first = asyncio.create_task(shared.read("k", server.read, 1e18))
        await asyncio.sleep(0.001)  # the first read is on the wire
        server.value = 1  # a write the later reads must see
        later = [asyncio.create_task(shared.read("k", server.read, 1e18)) for _ in range(20)]
        other = asyncio.create_task(shared.read("other key", server.read, 1e18))
        return [await first, *[await t for t in later], await other]

    first, *later, other = asyncio.run(run())
    assert first == (0, True)
    assert all(value == 1 for value, _ in later)  # none answered by the read that left before them
    assert sum(own for _, own in later) == 0  # served by the next read, not each their own
    assert other == (1, True)
    assert server.reads == 3  # the first, the shared next one, the other key's
    assert shared._lines == {}


def test_a_cancelled_caller_leaves_the_others_served():
    shared: SharedReads[int] = SharedReads()
    server = Server()

    async def run() -> list[int]:
        leader = asyncio.create_task(shared.read("k", server.read, 1e18))
        await asyncio.sleep(0.001)
        waiters = [asyncio.create_task(shared.read("k", server.read, 1e18)) for _ in range(3)]
        await asyncio.sleep(0.001)
        leader.cancel()
        waiters[0].cancel()
        values = []
        for task in waiters[1:]:
            values.append((await task)[0])
        with pytest.raises(asyncio.CancelledError):
            await leader
        return values

    assert asyncio.run(run()) == [0, 0]
    assert shared._lines == {}


def test_a_failed_read_fails_only_those_it_served():
    shared: SharedReads[int] = SharedReads()
    server = Server()

    async def run() -> tuple[list[Any], Any]:
        leader = asyncio.create_task(shared.read("k", server.read, 1e18))
        await asyncio.sleep(0.001)
        server.fail_next = True  # the next read, shared by these waiters, fails
        waiters = [asyncio.create_task(shared.read("k", server.read, 1e18)) for _ in range(3)]
        await leader
        results = await asyncio.gather(*waiters, return_exceptions=True)
        return results, await shared.read("k", server.read, 1e18)

    results, after = asyncio.run(run())
    assert all(isinstance(r, ConnectionResetError) for r in results)
    assert after == (0, True)
    assert shared._lines == {}


def test_the_shared_read_has_the_earliest_deadline_of_those_it_serves():
    shared: SharedReads[float] = SharedReads()
    seen: list[float] = []

    async def read(deadline: float) -> float:
        seen.append(deadline)
        await asyncio.sleep(0.005)
        return deadline

    async def run() -> None:
        leader = asyncio.create_task(shared.read("k", read, 100.0))
        await asyncio.sleep(0.001)
        waiters = [asyncio.create_task(shared.read("k", read, d)) for d in (30.0, 20.0, 40.0)]
        await leader
        await asyncio.gather(*waiters)

    asyncio.run(run())
    assert seen == [100.0, 20.0]
