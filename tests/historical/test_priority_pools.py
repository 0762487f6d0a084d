"""Query workers by priority (strata.data_node.priority_pools): low-priority queries run on workers
the kernel gives the CPU last, and DuckDB's threads started there inherit that."""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

import duckdb
import pytest

from strata.data_node.priority_pools import PriorityPools
from strata.server.thread_priority import LOW_NICE

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="per-thread nice values are Linux's")


def _nice() -> int:
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


def _duckdb_threads_nice() -> list[int]:
    """The nice value of every thread a DuckDB database started from this thread runs."""
    before = {p.name for p in Path("/proc/self/task").iterdir()}
    conn = duckdb.connect(config={"threads": 3})
    conn.execute("SELECT sum(range) FROM range(3000000)").fetchall()
    started = [p for p in Path("/proc/self/task").iterdir() if p.name not in before]
    values = [int((p / "stat").read_text().rsplit(")", 1)[1].split()[16]) for p in started]
    conn.close()
    return values


def test_low_priority_queries_run_at_a_raised_nice_value_and_so_do_their_duckdb_threads() -> None:
    pools = PriorityPools(workers=1, low_workers=1)
    try:
        normal = pools.for_priority(0).submit(_nice).result(timeout=30)
        low = pools.for_priority(-1).submit(_nice).result(timeout=30)
        assert low == min(19, normal + LOW_NICE) or low == LOW_NICE, (normal, low)
        assert low > normal
        assert pools.for_priority(5) is pools.normal and pools.for_priority(-5) is pools.low
        duck = pools.low.submit(_duckdb_threads_nice).result(timeout=60)
        assert duck and all(n == low for n in duck), duck
    finally:
        pools.shutdown()


def test_a_thread_lowers_its_priority_without_holding_the_interpreter_lock() -> None:
    """Through the C library's setpriority by ctypes (a CDLL function: the lock is let go around the
    call), so a thread the kernel takes off its core as its priority drops holds no other thread
    up; the nice value is set all the same, on that thread only."""
    import ctypes

    from strata.server import thread_priority

    setpriority = thread_priority._c_setpriority()
    assert setpriority is not None
    assert not getattr(setpriority, "_flags_", 0) & ctypes._FUNCFLAG_PYTHONAPI  # type: ignore[attr-defined]
    before = _nice()
    seen: list[int] = []

    def lowered() -> None:
        thread_priority.lower_own_priority(LOW_NICE)
        seen.append(_nice())

    worker = threading.Thread(target=lowered)
    worker.start()
    worker.join(30)
    assert seen == [max(before, LOW_NICE)] and _nice() == before
