"""Freed memory given back to the system while a server runs, so its resident size follows what it
holds rather than the most it ever held.

Allocators keep what a finished request freed. glibc's malloc (Python objects past 512 bytes,
sqlglot's trees of a long statement) keeps free chunks in its arenas, one per thread up to eight
per core, and returns to the system only the top of a heap, which one live chunk pins. The
jemalloc inside DuckDB (strata.query.duck_allocator) purges an arena's free pages only when that
arena allocates again; Arrow's mimalloc pool keeps an idle thread's pages. After a 10 MB statement
or a join that filled an engine slot, they sit at that high-water mark, and the next such request
may land in other pages: the process grows over hours with nothing leaking.

`MemoryRelease` looks every `period_s` and, once the resident size has grown by `threshold` bytes
since its last release, asks each to give back its free pages (`malloc_trim(0)`, which walks every
arena, not only the tops of heaps; a jemalloc purge; Arrow's `release_unused`), in a worker thread.
That costs some milliseconds per hundred megabytes; a steady process pays one read of
`/proc/self/statm` per period. Under load a release took 738 ms, and `malloc_trim` holds each arena's
lock while it walks it, so a thread allocating there (the event loop) waits: a release due waits
for a moment `quiet()` says nothing urgent runs (the broker: no query outside a capped lane), at
most one more period, so the memory stays bounded whatever the load.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

import pyarrow as pa

from strata.query.duck_allocator import purge
from strata.server.background import Background
from strata.server.memory_trace import libc, resident_bytes

log = logging.getLogger("strata.memory")
PERIOD_S = 10.0
THRESHOLD = 64 << 20
QUIET_POLL_S = 0.02


def release_free_memory() -> None:
    """Hand the pages glibc's arenas, DuckDB's allocator and Arrow's pool hold free back to the
    system now."""
    trim = getattr(libc(), "malloc_trim", None)
    if trim is not None:
        trim(0)
    purge()
    pa.default_memory_pool().release_unused()


class MemoryRelease(Background):
    """Releases free memory after the resident size grew by `threshold` since the last release."""

    def __init__(
        self,
        period_s: float = PERIOD_S,
        threshold: int = THRESHOLD,
        resident: Callable[[], int] = resident_bytes,
        release: Callable[[], None] = release_free_memory,
        quiet: Callable[[], bool] = lambda: True,
    ) -> None:
        super().__init__(self._run, "memory-release")
        self.period_s = period_s
        self.threshold = threshold
        self._resident = resident
        self._release = release
        self._quiet = quiet
        self._floor = resident()  # the resident size after the last release
        self.releases = 0

    def check(self) -> bool:
        """Release if the process grew past the threshold since the last release; whether it did
        (blocks for the release: call it from a worker thread)."""
        before = self._resident()
        if not self._grown(before):
            return False
        self._release_now(before)
        return True

    def _grown(self, resident: int) -> bool:
        """Grown past the threshold since the last release (else the floor follows a shrink)."""
        if resident - self._floor < self.threshold:
            self._floor = min(self._floor, resident)
            return False
        return True

    def _release_now(self, before: int | None = None) -> None:
        """Release now; `before`: the resident size just read (else read: a release that waited for
        a quiet moment logs the size it started from)."""
        if before is None:
            before = self._resident()
        started = time.perf_counter()
        self._release()
        self._floor = self._resident()
        self.releases += 1
        freed = before - self._floor
        ms = (time.perf_counter() - started) * 1000
        log.log(logging.INFO if freed >= self.threshold else logging.DEBUG,
                "gave %d MiB of free memory back to the system (resident %d -> %d MiB, %.0f ms)",
                freed >> 20, before >> 20, self._floor >> 20, ms)  # fmt: skip

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.period_s)
            try:
                if self._grown(self._resident()):  # the period's one read of /proc
                    await self._quiet_moment()
                    await asyncio.to_thread(self._release_now)
            except Exception:  # never takes the server down; the next period tries again
                log.exception("releasing free memory failed")

    async def _quiet_moment(self) -> None:
        """Until `quiet()`, for one period at most."""
        loop = asyncio.get_running_loop()
        give_up = loop.time() + self.period_s
        while not self._quiet() and loop.time() < give_up:  # noqa: ASYNC110 - a predicate, no event
            await asyncio.sleep(QUIET_POLL_S)
