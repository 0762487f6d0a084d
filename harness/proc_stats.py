"""What a process started by a test uses, read from /proc (Linux): resident memory now and at its
peak, and CPU time, so a test can say a broker never grew past its limit or a data node stopped
working when its query was cancelled."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

TICKS = os.sysconf("SC_CLK_TCK")


def _status_kib(pid: int, key: str) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise KeyError(key)


def rss_bytes(pid: int) -> int:
    """Resident memory now (VmRSS)."""
    return _status_kib(pid, "VmRSS") * 1024


def peak_rss_bytes(pid: int) -> int:
    """The most resident memory the process ever had (VmHWM, its high-water mark)."""
    return _status_kib(pid, "VmHWM") * 1024


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of every thread of the process so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime (fields 14 and 15 of stat)


def cpu_used(pid: int, seconds: float) -> float:
    """CPU seconds the process uses over the next `seconds` of wall time."""
    before = cpu_seconds(pid)
    time.sleep(seconds)
    return cpu_seconds(pid) - before


@contextmanager
def memory_watchdog(pid: int, limit_bytes: int, period: float = 0.05) -> Iterator[list[int]]:
    """Samples the process's resident memory while the block runs; the list yielded holds the
    highest sample so far (and stays, for the caller's message). Raises AssertionError at the end
    when a sample passed `limit_bytes`."""
    peak = [rss_bytes(pid)]
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(period):
            try:
                peak[0] = max(peak[0], rss_bytes(pid))
            except (OSError, KeyError):  # the process is gone
                return

    thread = threading.Thread(target=sample, name="memory-watchdog", daemon=True)
    thread.start()
    try:
        yield peak
    finally:
        stop.set()
        thread.join(5)
    assert peak[0] <= limit_bytes, f"process {pid} grew to {peak[0] >> 20} MiB, past {limit_bytes >> 20} MiB"
