"""SQL statements running on the broker: each one's deadline, its subqueries' allowance, and the
registry `DELETE /druid/v2/sql/{sqlQueryId}` finds it in.

A statement's `timeout` (the context's, else the broker's `--default-query-timeout`) runs from its
arrival through planning, every native stage (each sent with the time left), the broker's
relational engine and the streaming of its answer. Every step awaits through `bounded`, so a
timeout or a cancel stops whichever is running: a native stage is cancelled on the broker and
its data nodes (broker_service.query_runner), DuckDB is interrupted (broker_service.relational_engine),
planning is abandoned to its thread. Pure asyncio bookkeeping; the HTTP side is broker_service.sql_api.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from broker_service.relational_engine import EngineSlot
from strata.query.errors import QueryCancelled, QueryTimeout
from strata.sql.subquery_limits import SubqueryLimits

T = TypeVar("T")


class RunningStatement:
    def __init__(
        self, query_id: str, timeout_ms: int, limits: SubqueryLimits, on_finish: Callable[[], None]
    ) -> None:
        self.query_id = query_id
        self.started = asyncio.get_running_loop().time()
        self.settle(timeout_ms, limits)
        self.cancelled = False
        self.streaming = False  # its answer streams: the response finishes it, not the handler
        self.slot: EngineSlot | None = None  # while the statement's engine work runs, for a cancel
        self.priority = 0  # its context's: a negative one runs on the engine's low-priority slots
        self._steps: set[asyncio.Future[Any]] = set()
        self._on_finish: Callable[[], None] | None = on_finish

    def settle(self, timeout_ms: int, limits: SubqueryLimits) -> None:
        """The statement's bounds, from its arrival: set again once its SET statements are read."""
        self.timeout_ms = timeout_ms
        self.deadline = self.started + timeout_ms / 1000 if timeout_ms else None
        self.limits = limits

    def finish(self) -> None:
        """Leave the registry (once: the handler and a streamed body may both call it)."""
        on_finish, self._on_finish = self._on_finish, None
        if on_finish is not None:
            on_finish()

    def time_left_ms(self) -> int | None:
        """Milliseconds until the deadline (at least 1), None without a timeout."""
        if self.deadline is None:
            return None
        return max(1, int((self.deadline - asyncio.get_running_loop().time()) * 1000))

    async def bounded(self, step: Awaitable[T], lost: Callable[[T], None] | None = None) -> T:
        """Await one step of the statement within its deadline; a cancel stops it too. `lost`
        takes a result the step produced as the deadline passed (a slot it acquired, to give back)."""
        future = asyncio.ensure_future(step)
        if self.cancelled:
            future.cancel()
        self._steps.add(future)
        answered = False
        try:
            async with asyncio.timeout_at(self.deadline):
                result = await future
            answered = True
            return result
        except TimeoutError:
            raise self.timed_out() from None
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if self.cancelled and (task is None or task.cancelling() == 0):
                raise QueryCancelled(f"Query [{self.query_id}] was cancelled") from None
            raise
        finally:
            self._steps.discard(future)
            if not future.done():
                future.cancel()
            elif not answered and lost is not None and not future.cancelled() and future.exception() is None:
                lost(future.result())

    def timed_out(self) -> QueryTimeout:
        return QueryTimeout(f"Query [{self.query_id}] timed out after {self.timeout_ms} ms")

    def cancel(self) -> None:
        self.cancelled = True
        for step in list(self._steps):
            step.cancel()
        if self.slot is not None:
            self.slot.interrupt()


class Statements:
    """Statements running now, by sqlQueryId (a client may reuse one: each is cancelled)."""

    def __init__(self) -> None:
        self._running: dict[str, list[RunningStatement]] = {}

    def start(self, query_id: str, timeout_ms: int, limits: SubqueryLimits) -> RunningStatement:
        statement = RunningStatement(query_id, timeout_ms, limits, lambda: self._finish(statement))
        self._running.setdefault(query_id, []).append(statement)
        return statement

    def _finish(self, statement: RunningStatement) -> None:
        same = self._running.get(statement.query_id, [])
        if statement in same:
            same.remove(statement)
        if not same:
            self._running.pop(statement.query_id, None)

    def cancel(self, query_id: str) -> bool:
        """Stop every statement running under `query_id`; whether there was one."""
        found = self._running.get(query_id, [])
        for statement in list(found):
            statement.cancel()
        return bool(found)

    def __len__(self) -> int:
        return sum(len(s) for s in self._running.values())
