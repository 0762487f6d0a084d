"""A thread's claim on the CPU: work that may wait (Druid's low-priority queries) runs on threads
at a raised nice value, which the kernel serves after every other thread that wants a core.

Linux gives each thread its own nice value, and a thread starts with its creator's: a DuckDB
database opened on such a thread runs its own worker threads at that value too. Elsewhere the
threads run at the usual priority.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import logging
import os
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)

LOW_NICE = 10  # about a tenth of the CPU a nice-0 thread gets, when both want it


def lower_own_priority(nice: int = LOW_NICE) -> None:
    """Raise the calling thread's nice value to `nice` (a pool's initializer; 0: leave it).

    The C library's `setpriority` is called through ctypes, which lets go of the interpreter lock
    around the call (`os.setpriority` keeps it): a thread whose priority just dropped is likely
    taken off its core at once, and holding the lock then stalls every other thread of the
    process, the event loop first, until the kernel runs it again (a fresh low-priority pool's
    threads showed 50 samples of 811 holding the broker's lock there, py-spy --gil under
    bench.overload)."""
    if nice <= 0 or not hasattr(os, "setpriority"):
        return
    tid = threading.get_native_id()
    c_setpriority = _c_setpriority()
    try:
        if c_setpriority is None:
            os.setpriority(os.PRIO_PROCESS, tid, nice)
        elif c_setpriority(os.PRIO_PROCESS, tid, nice) != 0:
            errno = ctypes.get_errno()
            raise OSError(errno, os.strerror(errno))
    except OSError as e:  # a container may forbid it: the work still runs, at the usual priority
        log.warning("could not lower the CPU priority of low-priority work: %s", e)


@functools.cache
def _c_setpriority() -> Callable[[int, int, int], int] | None:
    """The C library's setpriority(which, who, prio), called without the interpreter lock; None
    where it cannot be loaded."""
    name = ctypes.util.find_library("c")
    try:
        setpriority = ctypes.CDLL(name, use_errno=True).setpriority if name else None
    except (OSError, AttributeError):
        return None
    if setpriority is None:
        return None
    setpriority.argtypes = [ctypes.c_int, ctypes.c_uint, ctypes.c_int]
    setpriority.restype = ctypes.c_int
    result: Callable[[int, int, int], int] = setpriority
    return result
