"""An operator's view of where a server's memory goes, turned on by an environment variable.

`STRATA_MEMORY_TRACE=SECONDS` starts `tracemalloc` at start-up and, every SECONDS, logs (logger
`strata.memory`) the process's resident size, what the C allocator holds and has free in its
arenas (glibc's `mallinfo2`), DuckDB's own allocator (strata.query.duck_allocator), Arrow's pool,
any gauges the caller adds, and the source lines whose Python allocations grew most since the
first report (`STRATA_MEMORY_TRACE_TOP` of them, default 15; with `STRATA_MEMORY_TRACE_FRAMES=N`,
each with the N calls that led to it).

What it tells apart: Python objects that pile up (a registry or cache without a bound: the same
lines grow report after report) from allocator high-water marks (the resident size grows while
the traced heap and the allocator's bytes in use stay flat, the difference free in its arenas).
Tracing slows every allocation down by some tens of percent and each report holds the interpreter
for as long as a snapshot takes: a diagnostic, not for production.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import logging
import os
import threading
import tracemalloc
from collections.abc import Callable, Mapping

import pyarrow as pa

from strata.query.duck_allocator import allocator_stats

ENV = "STRATA_MEMORY_TRACE"
TOP_ENV = "STRATA_MEMORY_TRACE_TOP"
FRAMES_ENV = "STRATA_MEMORY_TRACE_FRAMES"
log = logging.getLogger("strata.memory")
Gauges = Mapping[str, Callable[[], int]]
_MiB = 1 << 20


_MALLINFO2_FIELDS = ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
                     "fordblks", "keepcost")  # fmt: skip


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in _MALLINFO2_FIELDS]


@functools.cache
def libc() -> ctypes.CDLL | None:
    """The C library (for glibc's allocator calls), or None where it cannot be loaded."""
    name = ctypes.util.find_library("c")
    try:
        return ctypes.CDLL(name) if name else None
    except OSError:
        return None


def allocator_bytes() -> dict[str, int]:
    """glibc's arenas: `heap` obtained from the system (arenas and mmapped blocks), `used` by live
    allocations, `free` held in the arenas (what `malloc_trim` may give back); empty elsewhere."""
    mallinfo2 = getattr(libc(), "mallinfo2", None)
    if mallinfo2 is None:
        return {}
    mallinfo2.restype = _MallInfo2
    info = mallinfo2()
    return {
        "heap": info.arena + info.hblkhd,
        "used": info.uordblks + info.hblkhd,
        "free": info.fordblks,
    }


def resident_bytes() -> int:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


class MemoryTrace:
    """Reports every `period_s` from a daemon thread until `stop()`."""

    def __init__(self, period_s: float, gauges: Gauges | None = None, top: int = 15, frames: int = 1) -> None:
        self.period_s = period_s
        self.gauges = dict(gauges or {})
        self.top = top
        self.frames = max(1, frames)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="memory-trace", daemon=True)
        self._baseline: tracemalloc.Snapshot | None = None

    def start(self) -> MemoryTrace:
        if not tracemalloc.is_tracing():
            tracemalloc.start(self.frames)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _loop(self) -> None:
        while not self._stop.wait(self.period_s):
            try:
                self.report()
            except Exception:  # a diagnostic never takes its server down
                log.exception("memory trace report failed")

    def report(self) -> list[str]:
        """One report's lines (also logged)."""
        snapshot = tracemalloc.take_snapshot().filter_traces(
            [tracemalloc.Filter(False, tracemalloc.__file__), tracemalloc.Filter(False, "<unknown>")]
        )
        traced, peak = tracemalloc.get_traced_memory()
        parts = {"rss": resident_bytes(), "traced": traced, "traced_peak": peak,
                 "arrow": pa.total_allocated_bytes()}  # fmt: skip
        parts.update({f"malloc_{k}": v for k, v in allocator_bytes().items()})
        parts.update({f"duckdb_{k}": v for k, v in allocator_stats().items()})
        for name, gauge in self.gauges.items():
            try:
                parts[name] = gauge()
            except Exception as e:  # a gauge of something closing meanwhile
                log.debug("memory gauge %s failed: %s", name, e)
        lines = ["memory " + " ".join(f"{k}={v / _MiB:.1f}MiB" for k, v in parts.items())]
        if self._baseline is None:
            self._baseline = snapshot
        else:
            key = "lineno" if self.frames == 1 else "traceback"
            for stat in snapshot.compare_to(self._baseline, key)[: self.top]:
                where = " < ".join(f"{f.filename}:{f.lineno}" for f in reversed(stat.traceback))
                lines.append(f"  {stat.size_diff / _MiB:+.2f}MiB ({stat.count_diff:+d} blocks, "
                             f"{stat.size / _MiB:.2f}MiB now) {where}")  # fmt: skip
        for line in lines:
            log.info("%s", line)
        return lines


def trace_from_env(gauges: Gauges | None = None) -> MemoryTrace | None:
    """A running trace when `STRATA_MEMORY_TRACE` names a period in seconds, else None."""
    raw = os.environ.get(ENV, "").strip()
    if not raw:
        return None
    try:
        period = float(raw)
        top = int(os.environ.get(TOP_ENV, "15"))
        frames = int(os.environ.get(FRAMES_ENV, "1"))
    except ValueError:
        log.warning("%s=%r is not a number of seconds: no memory trace", ENV, raw)
        return None
    if period <= 0:
        return None
    log.info("tracing memory every %g s (%s)", period, ENV)
    return MemoryTrace(period, gauges, top, frames).start()
