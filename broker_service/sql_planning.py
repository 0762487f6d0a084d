"""Where SQL statements are parsed and planned: worker threads, never the event loop, within a time
bound.

Parsing a statement near the size limit takes seconds of CPU; on the event loop that would stall
every other client (health checks included). Small statements plan in a pool of their own, so a
few large ones queued in theirs cannot delay them. A statement still planning past
`PLANNING_SECONDS` is answered with a 400; its thread finishes in the background (a thread cannot be
stopped), which the single large-statement worker bounds to one at a time. A statement whose
context asks for a negative priority (Druid's low lane) plans on the low-priority threads, at a
raised nice value (strata.server.priority_threads).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from strata.query.errors import ResourceLimitExceeded
from strata.server.priority_threads import low_priority_executor
from strata.sql.guard import check_size

T = TypeVar("T")

PLANNING_SECONDS = 30.0
"""Seconds a statement may spend being parsed and planned (queueing for a worker included)."""

LARGE_STATEMENT_CHARS = 64 * 1024
"""Statements longer than this plan in the large-statement pool (one worker)."""


class PlanningPools:
    """The broker's SQL planning threads: one pool for ordinary statements, one for large ones."""

    def __init__(self, small_workers: int = 4, seconds: float = PLANNING_SECONDS) -> None:
        self.small = ThreadPoolExecutor(max_workers=small_workers, thread_name_prefix="sql-plan")
        self.large = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sql-plan-large")
        self.seconds = seconds

    def budget(self, sql: str, priority: int = 0) -> PlanningBudget:
        """The planning of one statement (refused at once past the size limit)."""
        check_size(sql)
        pool = self.large if len(sql) > LARGE_STATEMENT_CHARS else self.small
        if priority < 0 and pool is self.small:
            pool = low_priority_executor()
        return PlanningBudget(pool, asyncio.get_running_loop().time() + self.seconds, self.seconds)


class PlanningBudget:
    """Steps of one statement's planning, run in its pool and all ending by one deadline."""

    def __init__(self, pool: ThreadPoolExecutor, deadline: float, seconds: float) -> None:
        self.pool, self.deadline, self.seconds = pool, deadline, seconds

    async def run(self, fn: Callable[..., T], *args: object) -> T:
        loop = asyncio.get_running_loop()
        left = self.deadline - loop.time()
        future = loop.run_in_executor(self.pool, functools.partial(fn, *args))
        try:
            return await asyncio.wait_for(future, max(left, 0.0))
        except TimeoutError:
            raise ResourceLimitExceeded(
                f"Planning the SQL statement took longer than the limit of {self.seconds:g} seconds"
            ) from None
