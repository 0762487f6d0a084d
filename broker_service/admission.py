"""Admission control: a bounded number of running queries, Druid's lanes within them, and a short
wait queue served by priority.

A query first takes a slot of its lane (broker_service.laning): a lane at its cap refuses it at
once with Druid's 429 "Query capacity exceeded" naming the lane, as Druid's scheduler does, so a
flood in a capped lane never waits in front of other work. Then a slot of the total: when all are
taken it waits in a queue of at most `max_queued`, where a higher context `priority` is served
first (ties in arrival order); past the queue it is refused with the total's 429. A waiting query
that is cancelled or times out leaves the queue and takes nothing with it. `check` tells, taking
nothing, whether a query would be refused now: a SQL statement is refused before it is planned,
and while `refusing()` a request may be refused before it is routed (broker_service.refusal_path).

Refusals are counted per lane (`Refusals`: the metric, and a log line a minute at most, never one
per refusal: a flood of retries would bury the log and hold the event loop). A 429 asks the client
to come back after `RETRY_AFTER_S` (`Retry-After`), which a polite client honours.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager, suppress
from dataclasses import dataclass, field
from typing import Any

from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from broker_service.laning import Laning
from strata.query.errors import QueryCapacityExceeded

log = logging.getLogger(__name__)
RETRY_AFTER_S = 1  # what a 429's Retry-After asks (whole seconds, as HTTP has it)
TOTAL = "total"  # the refusals of the broker's whole capacity, as Druid names that limit
LOG_EVERY_S = 60.0


@dataclass(order=True)
class _Waiter:
    rank: tuple[int, int]  # (-priority, arrival): the heap's first is served first
    ready: asyncio.Future[None] = field(compare=False)


class Admission:
    def __init__(self, max_concurrent: int, max_queued: int, laning: Laning | None = None):
        if max_concurrent < 1 or max_queued < 0:
            raise ValueError("max_concurrent must be >= 1 and max_queued >= 0")
        self.max_concurrent = max_concurrent
        self.max_queued = max_queued
        self.laning = laning or Laning()
        self.running = 0
        self.urgent_running = 0  # admitted queries of priority 0 and up: not Druid's low ones
        self._urgent_idle = asyncio.Event()
        self._urgent_idle.set()
        self.lane_running: Counter[str] = Counter()
        self._waiting: list[_Waiter] = []
        self._arrivals = itertools.count()
        self.refusals = Refusals()

    @property
    def queued(self) -> int:
        return len(self._waiting)

    @asynccontextmanager
    async def admit(self, *, priority: int = 0, lane: str | None = None) -> AsyncIterator[str | None]:
        """Hold a slot while the body runs; yields the lane the query runs in."""
        lane, cap = self._lane_with_room(priority, lane)
        if lane is not None and cap is not None:
            self.lane_running[lane] += 1
        try:
            await self._take_slot(priority)
        except BaseException:
            self._leave_lane(lane, cap)
            raise
        urgent = priority >= 0
        self.urgent_running += urgent
        if urgent:
            self._urgent_idle.clear()
        try:
            yield lane
        finally:
            self.urgent_running -= urgent
            if not self.urgent_running:
                self._urgent_idle.set()
            self._give_slot()
            self._leave_lane(lane, cap)

    async def cheap_lane_quiet(self, max_wait_s: float) -> None:
        """Return once no query of priority 0 or up runs, or after `max_wait_s`: where low-priority
        work goes on in pieces (broker_service.paced_answers), the cheap lane's go first."""
        if self.urgent_running:
            with suppress(TimeoutError):
                await asyncio.wait_for(self._urgent_idle.wait(), max_wait_s)

    def check(self, *, priority: int = 0, lane: str | None = None) -> None:
        """Raise the 429 `admit` would raise now, taking nothing: a query refused before the work
        that comes ahead of its admission (planning a SQL statement)."""
        self._lane_with_room(priority, lane)
        if not self._runs_now() and self._queue_full():
            raise self._total_full()

    def refusing(self) -> bool:
        """Whether some query would be refused now: a lane at its cap, or every slot and the queue
        taken."""
        if not self._runs_now() and self._queue_full():
            return True
        return any(self.lane_running[lane] >= cap for lane, cap in self.laning.limits.items())

    def _lane_with_room(self, priority: int, lane: str | None) -> tuple[str | None, int | None]:
        """The lane a query runs in and that lane's cap; Druid's 429 naming it if it is full now."""
        lane = self.laning.lane_of(priority, lane)
        cap = self.laning.cap(lane)
        if lane is not None and cap is not None and self.lane_running[lane] >= cap:
            self.refusals.count(lane)
            raise _lane_full(lane, cap)
        return lane, cap

    def _runs_now(self) -> bool:
        """A slot of the total is free and nobody waits for one."""
        return self.running < self.max_concurrent and not self._waiting

    def _queue_full(self) -> bool:
        return len(self._waiting) >= self.max_queued

    def lanes(self) -> dict[str, dict[str, int]]:
        """Each capped lane's running queries and cap (for /status)."""
        return {
            name: {"running": self.lane_running[name], "limit": cap}
            for name, cap in self.laning.limits.items()
        }

    async def _take_slot(self, priority: int) -> None:
        if self._runs_now():
            self.running += 1
            return
        if self._queue_full():
            raise self._total_full()
        waiter = _Waiter((-priority, next(self._arrivals)), asyncio.get_running_loop().create_future())
        heapq.heappush(self._waiting, waiter)
        try:
            await waiter.ready  # resolved by _give_slot, which counted us as running
        except BaseException:
            if waiter.ready.done() and not waiter.ready.cancelled():
                self._give_slot()  # handed a slot as we were cancelled: pass it on
            elif waiter in self._waiting:
                self._waiting.remove(waiter)
                heapq.heapify(self._waiting)
            raise

    def _give_slot(self) -> None:
        while self._waiting:
            waiter = heapq.heappop(self._waiting)
            if not waiter.ready.done():
                waiter.ready.set_result(None)  # the slot passes straight to it: `running` unchanged
                return
        self.running -= 1

    def _leave_lane(self, lane: str | None, cap: int | None) -> None:
        if lane is not None and cap is not None:
            self.lane_running[lane] -= 1

    def _total_full(self) -> QueryCapacityExceeded:
        self.refusals.count(TOTAL)
        return QueryCapacityExceeded(
            f"Too many concurrent queries, total query capacity of {self.max_concurrent} exceeded. "
            "Please try your query again later."
        )


def _lane_full(lane: str, cap: int) -> QueryCapacityExceeded:
    return QueryCapacityExceeded(
        f"Too many concurrent queries for lane '{lane}', query capacity of {cap} exceeded. "
        "Please try your query again later."
    )


class Refusals:
    """Queries refused with 429, by lane (`TOTAL`: the broker's whole capacity), and a warning that
    sums them up: at the first refusal, then at most every `log_every_s` while refusals go on."""

    def __init__(self, log_every_s: float = LOG_EVERY_S, clock: Callable[[], float] = time.monotonic) -> None:
        self.by_lane: Counter[str] = Counter()
        self.log_every_s = log_every_s
        self._clock = clock
        self._unlogged: Counter[str] = Counter()
        self._logged_at: float | None = None

    def count(self, lane: str) -> None:
        self.by_lane[lane] += 1
        self._unlogged[lane] += 1
        now = self._clock()
        if self._logged_at is not None and now - self._logged_at < self.log_every_s:
            return
        since = "" if self._logged_at is None else f" in the last {now - self._logged_at:.0f} s"
        lanes = ", ".join(f"{n} {'of the total' if name == TOTAL else f'in lane {name!r}'}"
                          for name, n in self._unlogged.most_common())  # fmt: skip
        log.warning("refused %d queries with 429 (query capacity exceeded)%s: %s",
                    self._unlogged.total(), since, lanes)  # fmt: skip
        self._unlogged.clear()
        self._logged_at = now


class HeldStream(StreamingResponse):
    """A streamed answer holding its admission slot (`slot`, entered before the first byte so a
    refusal is still a 429) until the stream ends, however it ends: finished, failed, or the client
    gone before the first chunk."""

    def __init__(self, slot: AsyncExitStack, content: Any, **kwargs: Any) -> None:
        super().__init__(content, **kwargs)
        self.slot = slot

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            await self.slot.aclose()
