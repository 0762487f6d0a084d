"""Admission control: a bounded number of running queries plus a short wait queue.

Beyond both, a query is refused at once with Druid's 429 "Query capacity exceeded" rather than
piling up behind slow ones.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from strata.query.errors import QueryCapacityExceeded


class Admission:
    def __init__(self, max_concurrent: int, max_queued: int):
        if max_concurrent < 1 or max_queued < 0:
            raise ValueError("max_concurrent must be >= 1 and max_queued >= 0")
        self.max_concurrent = max_concurrent
        self.max_queued = max_queued
        self._slots = asyncio.Semaphore(max_concurrent)
        self.running = 0
        self.queued = 0

    @asynccontextmanager
    async def admit(self) -> AsyncIterator[None]:
        if self._slots.locked():
            if self.queued >= self.max_queued:
                raise QueryCapacityExceeded(
                    f"Too many concurrent queries, total query capacity of {self.max_concurrent} "
                    f"(plus a queue of {self.max_queued}) exceeded. Please try your query again later."
                )
            self.queued += 1
            try:
                await self._slots.acquire()
            finally:
                self.queued -= 1
        else:
            await self._slots.acquire()
        self.running += 1
        try:
            yield
        finally:
            self.running -= 1
            self._slots.release()
