"""A task a server runs beside its requests for as long as it runs (a periodic check, a probe)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any


class Background:
    """`run()` as a task on the running loop from `start` until `stop` cancels it."""

    def __init__(self, run: Callable[[], Coroutine[Any, Any, None]], name: str) -> None:
        self._make = run
        self.name = name
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._make(), name=self.name)

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
