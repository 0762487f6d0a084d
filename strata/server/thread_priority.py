"""A thread's claim on the CPU: work that may wait (Druid's low-priority queries) runs on threads
at a raised nice value, which the kernel serves after every other thread that wants a core.

Linux gives each thread its own nice value, and a thread starts with its creator's: a DuckDB
database opened on such a thread runs its own worker threads at that value too. Elsewhere the
threads run at the usual priority.
"""

from __future__ import annotations

import logging
import os
import threading

log = logging.getLogger(__name__)

LOW_NICE = 10  # about a tenth of the CPU a nice-0 thread gets, when both want it


def lower_own_priority(nice: int = LOW_NICE) -> None:
    """Raise the calling thread's nice value to `nice` (a pool's initializer; 0: leave it)."""
    setpriority = getattr(os, "setpriority", None)
    if setpriority is None or nice <= 0:
        return
    try:
        setpriority(os.PRIO_PROCESS, threading.get_native_id(), nice)
    except OSError as e:  # a container may forbid it: the work still runs, at the usual priority
        log.warning("could not lower the CPU priority of low-priority work: %s", e)
