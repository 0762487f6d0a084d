"""A memory watchdog over server processes: their resident set read from `/proc/<pid>/status`
(VmRSS now, VmHWM the peak the kernel kept) every so often in a thread, so a test or benchmark can
say how large a process grew while hostile requests ran, and fail past a bound. With `limit_bytes`
and `on_over`, a process growing past the bound is dealt with at once (a test kills the server it
started), so a regression fails the test instead of taking the shared host's memory."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType


@dataclass(frozen=True)
class MemorySample:
    at_s: float  # seconds since the watchdog started
    rss: dict[str, int]  # process name -> VmRSS bytes (absent: the process was gone)


def read_memory(pid: int) -> tuple[int, int] | None:
    """(VmRSS, VmHWM) of a process in bytes; None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    values = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            values[key] = int(rest.split()[0]) * 1024  # the kernel says kB
    if "VmRSS" not in values:
        return None  # a zombie
    return values["VmRSS"], values.get("VmHWM", values["VmRSS"])


def children(pid: int) -> list[int]:
    """A process's child processes (a broker's merge workers), from /proc (Linux)."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*/children"):
        try:
            found += [int(c) for c in task.read_text().split()]
        except OSError:
            continue
    return sorted(set(found))


def server_pids(broker: int, historicals: list[int]) -> dict[str, int]:
    """Name -> pid for a watchdog: the broker, its worker processes, the historicals."""
    pids = {"broker": broker, **{f"broker-worker{i}": c for i, c in enumerate(children(broker))}}
    return {**pids, **{f"historical{i}": pid for i, pid in enumerate(historicals)}}


@dataclass
class MemoryWatchdog:
    """Samples `pids` (name -> pid) every `period_s`; `peak` is each one's highest RSS seen (or its
    VmHWM, which the kernel keeps between samples). Use as a context manager."""

    pids: Mapping[str, int]
    period_s: float = 0.5
    limit_bytes: int | None = None
    on_over: Callable[[str], None] | None = None  # called once per process past `limit_bytes`
    samples: list[MemorySample] = field(default_factory=list)
    peak: dict[str, int] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _started: float = 0.0
    _acted: set[str] = field(default_factory=set)

    def __enter__(self) -> MemoryWatchdog:
        self._started = time.monotonic()
        self.sample()
        self._thread = threading.Thread(target=self._run, name="memory-watchdog", daemon=True)
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.sample()

    def watch(self, name: str, pid: int) -> None:
        """Follow another process (a restarted node) under `name` from now on."""
        self.pids = {**self.pids, name: pid}

    def sample(self) -> MemorySample:
        rss: dict[str, int] = {}
        for name, pid in self.pids.items():
            found = read_memory(pid)
            if found is None:
                continue
            rss[name] = found[0]
            self.peak[name] = max(self.peak.get(name, 0), found[0], found[1])
            over = self.limit_bytes is not None and found[0] > self.limit_bytes
            if over and self.on_over is not None and name not in self._acted:
                self._acted.add(name)
                self.on_over(name)
        taken = MemorySample(round(time.monotonic() - self._started, 1), rss)
        self.samples.append(taken)
        return taken

    def _run(self) -> None:
        while not self._stop.wait(self.period_s):
            self.sample()

    def over(self, limit_bytes: int) -> dict[str, int]:
        """Processes whose peak passed `limit_bytes`."""
        return {name: peak for name, peak in self.peak.items() if peak > limit_bytes}

    def summary(self) -> dict[str, dict[str, float]]:
        """Per process: its first, last and peak RSS, in MB."""
        out: dict[str, dict[str, float]] = {}
        for name in self.peak:
            seen = [s.rss[name] for s in self.samples if name in s.rss]
            out[name] = {
                "first_mb": _mb(seen[0]) if seen else 0.0,
                "last_mb": _mb(seen[-1]) if seen else 0.0,
                "peak_mb": _mb(self.peak[name]),
            }
        return out


def _mb(value: int) -> float:
    return round(value / 1_048_576, 1)
