"""bench.thread_cpu: CPU seconds per kind of thread beside its nice value, read from /proc and named
from py-spy's dump of the process."""

from __future__ import annotations

import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from bench.thread_cpu import ThreadCpu, task_stats
from strata.server.thread_priority import LOW_NICE, lower_own_priority

pytestmark = pytest.mark.skipif(
    sys.platform != "linux", reason="/proc and per-thread nice values are Linux's"
)


def spin(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def test_a_threads_cpu_is_counted_under_its_name_and_nice_value() -> None:
    assert threading.get_native_id() in task_stats(os.getpid())
    with ThreadPoolExecutor(1, "busy-low", initializer=lower_own_priority, initargs=(LOW_NICE,)) as low:
        with ThreadCpu({"me": os.getpid()}, period_s=0.1) as seen:
            low.submit(spin, 0.3).result(timeout=60)
        summary = seen.summary(least_s=0.0)["me"]
    kinds = {(t["kind"], t["nice"]): t["cpu_s"] for t in summary["threads"]}
    assert kinds[("busy-low", LOW_NICE)] >= 0.25  # its own CPU time, however long it waited for it
    assert summary["cpu_s_niced"] >= 0.25
