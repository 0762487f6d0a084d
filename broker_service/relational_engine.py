"""The broker's relational engine: DuckDB databases of one statement's memory each, lent to one
statement at a time, whose work a timeout or a cancel interrupts.

`EngineLimits.slots` databases (`--engine-memory` / `--query-memory`) exist, so the broker's DuckDB
never holds more than `--engine-memory`; a statement waits for one within its deadline. Its work
runs in a worker thread of the engine; a cancel or timeout interrupts DuckDB from the event loop
(`interrupt()` is thread-safe) and the statement answers at once, while the slot goes back only
once its thread has stopped, so the next statement never shares a busy database.

Statements of negative context priority (what Druid's `hilo` laning puts in lane `low`) get slots
of their own (`EngineSlots.low`, a quarter of them): one DuckDB thread each, on worker threads at
nice 10 (strata.server.thread_priority), so however many run, they take at most that many cores and
only what the kernel has left after every other thread of the host; the rest of the slots serve
everything else at full speed.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import duckdb
import pyarrow as pa

from strata.query.duck import EngineLimits
from strata.server.thread_priority import LOW_NICE, lower_own_priority
from strata.sql.sandbox import engine_failure, open_database

log = logging.getLogger(__name__)
T = TypeVar("T")


class EngineSlot:
    """One database; one statement's cursor on it at a time."""

    def __init__(self, engine: RelationalEngine, number: int) -> None:
        self.engine = engine
        self.name = f"slot{number}"
        self._db: duckdb.DuckDBPyConnection | None = None
        self._cursor: duckdb.DuckDBPyConnection | None = None
        self._closers: list[Callable[[], None]] = []
        self._working: asyncio.Future[Any] | None = None

    def cursor(self) -> duckdb.DuckDBPyConnection:
        """The statement's cursor, opened on first use (in a worker thread: opening a database and
        installing Druid's functions takes some 15 ms, once per slot)."""
        if self._db is None:
            self._db = open_database(self.engine.limits, f"{self.name}")
        if self._cursor is None:
            self._cursor = self._db.cursor()
        return self._cursor

    def on_release(self, close: Callable[[], None]) -> None:
        """Run `close` (a reader over the cursor) when the slot goes back."""
        self._closers.append(close)

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """`fn(*args)` in a worker thread; DuckDB's and Arrow's failures as Druid's errors. A cancel
        (the statement's timeout or DELETE) interrupts DuckDB and passes on at once."""
        loop = asyncio.get_running_loop()
        working = loop.run_in_executor(self.engine.pool, _failing_as_druid, fn, args, self.engine.limits)
        self._working = working
        try:
            return await asyncio.shield(working)
        except asyncio.CancelledError:
            self.interrupt()
            working.add_done_callback(_taken)  # the interrupted work's failure: nobody awaits it now
            raise

    def interrupt(self) -> None:
        cursor = self._cursor
        if cursor is not None:
            with contextlib.suppress(duckdb.Error):
                cursor.interrupt()

    def release(self, done: Callable[[], None]) -> None:
        """Close the statement's readers and cursor once no thread works on them, then `done`."""
        working = self._working
        if working is not None and not working.done():
            self.interrupt()
            working.add_done_callback(lambda _: self.release(done))
            return
        self._working = None
        closers, self._closers = self._closers, []
        cursor, self._cursor = self._cursor, None
        try:
            for close in closers:
                close()
            if cursor is not None:
                cursor.close()
        except (duckdb.Error, pa.ArrowException) as e:  # the next statement gets a fresh database
            log.warning("closing a statement on the broker's engine failed (%s); reopening it", e)
            self.close()
        done()

    def close(self) -> None:
        db, self._db = self._db, None
        if db is not None:
            with contextlib.suppress(duckdb.Error):
                db.close()


def _taken(work: asyncio.Future[Any]) -> None:
    if not work.cancelled():
        work.exception()


def _failing_as_druid(fn: Callable[..., T], args: tuple[Any, ...], limits: EngineLimits) -> T:
    try:
        return fn(*args)
    except (duckdb.Error, pa.ArrowException, RecursionError, MemoryError) as e:
        raise engine_failure(e, limits) from None


class RelationalEngine:
    """DuckDB slots of the broker and the threads their work runs in (`nice`: at that nice value,
    and so are the DuckDB threads of databases opened there)."""

    def __init__(
        self, limits: EngineLimits, slots: int | None = None, *, nice: int = 0, name: str = "sql-engine"
    ) -> None:
        self.limits = limits
        self.slots = limits.slots if slots is None else slots
        self.pool = ThreadPoolExecutor(
            max_workers=self.slots, thread_name_prefix=name, initializer=lower_own_priority, initargs=(nice,)
        )
        self._free = [EngineSlot(self, n) for n in range(self.slots)]
        self._available = asyncio.Semaphore(self.slots)

    @property
    def busy(self) -> int:
        """Slots lent out, or still finishing an interrupted statement's work."""
        return self.slots - len(self._free)

    async def acquire(self) -> EngineSlot:
        """A slot for one statement's engine work; the caller bounds the wait by its deadline and
        gives the slot back with `release`."""
        await self._available.acquire()
        return self._free.pop()

    def release(self, slot: EngineSlot) -> None:
        """Give `slot` back once the statement's work on it has stopped (never suspends)."""
        slot.release(lambda: self._give_back(slot))

    def _give_back(self, slot: EngineSlot) -> None:
        self._free.append(slot)
        self._available.release()

    def close(self) -> None:
        for slot in self._free:
            slot.close()
        self.pool.shutdown(wait=False, cancel_futures=True)


LOW_THREADS = 1  # DuckDB threads of a low-priority statement


class EngineSlots:
    """The broker's engine: `limits.slots` databases in all (so `--engine-memory` bounds them), a
    quarter of them (at least one, once there are two) for statements of negative priority."""

    def __init__(self, limits: EngineLimits) -> None:
        low = limits.slots // 4 or (1 if limits.slots > 1 else 0)
        self.normal = RelationalEngine(limits, limits.slots - low)
        self.low: RelationalEngine | None = None
        if low:
            capped = dataclasses.replace(limits, threads=min(limits.threads, LOW_THREADS))
            self.low = RelationalEngine(capped, low, nice=LOW_NICE, name="sql-engine-low")

    def for_priority(self, priority: int) -> RelationalEngine:
        return self.low if priority < 0 and self.low is not None else self.normal

    def status(self) -> dict[str, object]:
        """For /status: slots and busy ones in all, and the low-priority ones'."""
        engines = [self.normal] if self.low is None else [self.normal, self.low]
        out: dict[str, object] = {"slots": sum(e.slots for e in engines)}
        out["busy"] = sum(e.busy for e in engines)
        if self.low is not None:
            low = self.low
            out["low"] = {"slots": low.slots, "busy": low.busy, "threads": low.limits.threads}
        return out

    def close(self) -> None:
        self.normal.close()
        if self.low is not None:
            self.low.close()
