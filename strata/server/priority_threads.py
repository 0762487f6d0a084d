"""Python work a query sends off the event loop, on threads chosen by its priority.

A low-priority query (negative context priority: Druid's low lane) causes work besides its
engine's - its partials decoded and merged, its SQL planned, its answer made into rows for a join
and encoded - which on the shared worker threads ran at the usual priority, and queued in front of
the cheap queries' own work there. It runs instead on threads of their own at a raised nice value
(strata.server.thread_priority), one pool per process as the event loop's default executor is: the
kernel gives the cores to the cheap lane's threads, and to every other process, first, and no
cheap query's work waits behind it in a pool's queue.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import threading
from collections.abc import Callable
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import Any, TypeVar

from strata.server.thread_priority import LOW_NICE, lower_own_priority

T = TypeVar("T")
LOW_WORKERS = 4

_low: ThreadPoolExecutor | None = None
_made = threading.Lock()


def low_priority_executor() -> ThreadPoolExecutor:
    """This process's threads for low-priority work (nice `LOW_NICE`), made at first use."""
    global _low
    with _made:
        if _low is None:
            _low = ThreadPoolExecutor(
                LOW_WORKERS, thread_name_prefix="low-priority", initializer=lower_own_priority,
                initargs=(LOW_NICE,),
            )  # fmt: skip
        return _low


def executor_for(priority: int, normal: Executor | None = None) -> Executor | None:
    """Where a query of `priority` runs its work off the loop: the low-priority threads below 0,
    else `normal` (None: the event loop's default executor)."""
    return low_priority_executor() if priority < 0 else normal


async def run_for_priority(
    priority: int, fn: Callable[..., T], *args: Any, normal: Executor | None = None
) -> T:
    """`fn(*args)` on a thread for a query of `priority` (see `executor_for`), in the caller's
    context variables, as `asyncio.to_thread` runs it."""
    call = functools.partial(contextvars.copy_context().run, fn, *args)
    return await asyncio.get_running_loop().run_in_executor(executor_for(priority, normal), call)
