"""Concurrent callers asking for the same key share one fetch (Go's singleflight, for asyncio).

Fifty identical cold queries arriving together should cost one fetch per segment, not fifty. The
first caller starts the fetch as its own task; later callers for the same key, while it runs, await
that task. A waiter that is cancelled leaves without disturbing the others; the fetch is cancelled
only when no waiter is left. An exception reaches every waiter. Once the fetch finishes the key is
forgotten, so later callers start afresh (by then the cache should answer them).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


@dataclass
class _Flight(Generic[V]):
    task: asyncio.Task[V]
    waiters: int = 0


class SingleFlight(Generic[K, V]):
    def __init__(self) -> None:
        self._flights: dict[K, _Flight[V]] = {}

    def in_flight(self, key: K) -> bool:
        return key in self._flights

    def __len__(self) -> int:
        return len(self._flights)

    async def do(self, key: K, coro_factory: Callable[[], Awaitable[V]]) -> V:
        """The result of `coro_factory()`, called only if no fetch for `key` is already running."""
        flight = self._flights.get(key)
        if flight is None:
            flight = self._start(key, coro_factory)
        flight.waiters += 1
        try:
            return await asyncio.shield(flight.task)
        finally:
            flight.waiters -= 1
            if flight.waiters == 0 and not flight.task.done():
                flight.task.cancel()  # every waiter was cancelled: nobody wants the result

    def _start(self, key: K, coro_factory: Callable[[], Awaitable[V]]) -> _Flight[V]:
        async def run() -> V:
            return await coro_factory()

        flight: _Flight[V] = _Flight(asyncio.create_task(run()))
        self._flights[key] = flight

        def forget(task: asyncio.Task[V]) -> None:
            if self._flights.get(key) is flight:
                del self._flights[key]
            if not task.cancelled():
                task.exception()  # retrieved: a fetch whose waiters all left must not warn at exit

        flight.task.add_done_callback(forget)
        return flight
