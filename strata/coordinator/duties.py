"""The coordinator's duty loop: periodic jobs over the metadata store, as Druid's coordinator runs its
duties (retention rules, auto-compaction, killing unused segments are duties there).

A duty has a name, a period and a blocking `run(coordinator)`, run in a worker thread; the loop
runs each when it is due, one at a time, and a failing duty is logged and tried again at its next
period without stopping the others. Duties are added with `DutyLoop.add` before `start`; the
coordinator's own is the lead heartbeat (strata.coordinator.service).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger("strata.coordinator")


@dataclass
class Duty:
    name: str
    period_s: float
    run: Callable[[Any], None]  # called with the Coordinator, in a worker thread
    next_due: float = field(default=0.0, compare=False)
    runs: int = field(default=0, compare=False)
    failures: int = field(default=0, compare=False)
    last_error: str | None = field(default=None, compare=False)


class DutyLoop:
    def __init__(self, owner: Any) -> None:
        self._owner = owner
        self.duties: list[Duty] = []
        self._task: asyncio.Task[None] | None = None
        self._wake: asyncio.Event | None = None
        self._locks: dict[str, asyncio.Lock] = {}  # a duty run by request never overlaps its own run

    def add(self, duty: Duty) -> None:
        if any(d.name == duty.name for d in self.duties):
            raise ValueError(f"a duty named {duty.name!r} runs already")
        self.duties.append(duty)

    def status(self) -> list[dict[str, Any]]:
        return [{"name": d.name, "periodSeconds": d.period_s, "runs": d.runs, "failures": d.failures,
                 "lastError": d.last_error} for d in self.duties]  # fmt: skip

    def wake(self, name: str) -> None:
        """Run the named duty soon (a change it acts on was just made); call on the event loop."""
        for duty in self.duties:
            if duty.name == name:
                duty.next_due = 0.0
        if self._wake is not None:
            self._wake.set()

    async def start(self) -> None:
        self._wake = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._loop(), name="coordinator-duties")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _loop(self) -> None:
        assert self._wake is not None
        while True:
            self._wake.clear()
            now = time.monotonic()
            for duty in self.duties:
                if now >= duty.next_due:
                    duty.next_due = now + duty.period_s
                    await self.run_once(duty)
            wake = min((d.next_due for d in self.duties), default=time.monotonic() + 1.0)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), max(0.05, wake - time.monotonic()))

    async def run_once(self, duty: Duty) -> None:
        async with self._locks.setdefault(duty.name, asyncio.Lock()):
            try:
                await asyncio.to_thread(duty.run, self._owner)
                duty.last_error = None
            except Exception as e:  # one failing duty never stops the others
                duty.failures += 1
                duty.last_error = f"{type(e).__name__}: {e}"
                log.warning("coordinator duty %s failed: %s", duty.name, duty.last_error)
            finally:
                duty.runs += 1
