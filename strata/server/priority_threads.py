"""Python work a query sends off the event loop, on threads chosen by its priority.

A low-priority query (negative context priority: Druid's low lane) causes work besides its
engine's - its partials decoded and merged, its SQL planned, its answer made into rows for a join
and encoded - which on the shared worker threads queued in front of the cheap queries' own work.
It runs instead on threads of their own, one pool per process as the event loop's default executor
is, so no cheap query's work waits behind it in a pool's queue.

They run at nice 10 (strata.server.thread_priority), so the kernel gives the cores to the cheap
lane's threads, and to every other process, first; a server may set another value
(`set_low_priority_nice`, 0: the usual priority). The risk of a raised one here: Python work holds
the interpreter lock, and a thread that the kernel takes off a busy core while it holds the lock
makes the event loop wait until the kernel runs it again (a priority inversion: `python -m
bench.loop_hold --burners 2`, with two processes spinning at nice 0 on a 2-core host, a cheap
request's p90 beside rows made at nice 10 1,209-3,074 ms against 146-1,368 ms at nice 0). So the
broker sends its large Python work (merges) to processes of their own, and keeps here what is left.
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
_nice = LOW_NICE


def set_low_priority_nice(nice: int) -> None:
    """The nice value of the low-priority threads from now on (0: the usual priority); threads
    made before finish their work and go."""
    global _low, _nice
    with _made:
        _nice = nice
        if _low is not None:
            _low.shutdown(wait=False)
            _low = None


def low_priority_executor() -> ThreadPoolExecutor:
    """This process's threads for low-priority work (nice `LOW_NICE` unless set), made at first use."""
    global _low
    with _made:
        if _low is None:
            _low = ThreadPoolExecutor(
                LOW_WORKERS, thread_name_prefix="low-priority", initializer=lower_own_priority,
                initargs=(_nice,),
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
