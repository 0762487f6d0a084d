"""CPU seconds per thread over a window, beside each thread's nice value: which work of which
process ran at the usual priority (nice 0) while heavy low-priority queries ran, and which ran below
it. Threads are read from `/proc/<pid>/task/*/stat` every `period_s` (a thread that ends keeps what
it had used at its last sample) and named at the end from py-spy's dump of each Python process
(`query-low_3` -> `query-low`); a thread Python does not know (DuckDB's, Arrow's) is `native`.
Linux only.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import threading
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from bench.profile_stacks import py_spy

_NUMBERED = re.compile(r"[_-]\d+$")
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass
class _Thread:
    first: int  # CPU ticks at the first sample (0 for a thread that started after it)
    last: int
    nice: int


def task_stats(pid: int) -> dict[int, tuple[int, int]]:
    """Thread id -> (CPU ticks used, user and system; nice value) of each of `pid`'s threads."""
    out: dict[int, tuple[int, int]] = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                text = f.read()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2 :].split()  # fields from the 3rd (state) on
        out[int(tid)] = (int(fields[11]) + int(fields[12]), int(fields[16]))
    return out


def thread_names(pid: int) -> dict[int, str]:
    """Native thread id -> Python thread name, from py-spy's dump ({} when it cannot read `pid`)."""
    try:
        done = subprocess.run(
            [py_spy(), "dump", "-p", str(pid), "--json", "--nonblocking"],
            capture_output=True, timeout=30, check=False,
        )  # fmt: skip
        threads: list[dict[str, Any]] = json.loads(done.stdout) if done.returncode == 0 else []
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return {}
    return {t["os_thread_id"]: t["thread_name"] or "" for t in threads if t.get("os_thread_id")}


class ThreadCpu:
    """Per-thread CPU of `pids` (name -> pid) between enter and exit. Use as a context manager;
    `summary()` afterwards."""

    def __init__(self, pids: Mapping[str, int], period_s: float = 1.0) -> None:
        self.pids = dict(pids)
        self.period_s = period_s
        self._threads: dict[tuple[str, int], _Thread] = {}
        self._names: dict[str, dict[int, str]] = {}
        self._stop = threading.Event()
        self._sampler: threading.Thread | None = None

    def __enter__(self) -> ThreadCpu:
        self._sample(first=True)
        self._sampler = threading.Thread(target=self._run, name="thread-cpu", daemon=True)
        self._sampler.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        if self._sampler is not None:
            self._sampler.join(timeout=10)
        self._sample(first=False)
        self._names = {name: thread_names(pid) for name, pid in self.pids.items()}

    def _run(self) -> None:
        while not self._stop.wait(self.period_s):
            self._sample(first=False)

    def _sample(self, *, first: bool) -> None:
        for name, pid in self.pids.items():
            for tid, (ticks, nice) in task_stats(pid).items():
                seen = self._threads.get((name, tid))
                if seen is None:
                    self._threads[(name, tid)] = _Thread(ticks if first else 0, ticks, nice)
                else:
                    seen.last, seen.nice = ticks, nice

    def summary(self, least_s: float = 0.05) -> dict[str, Any]:
        """Per process: CPU seconds at nice 0 and above it, and per thread kind and nice value
        (those using at least `least_s`), the busiest first."""
        out: dict[str, Any] = {}
        for name in self.pids:
            kinds: dict[tuple[str, int], list[float]] = defaultdict(lambda: [0.0, 0.0])
            for (owner, tid), t in self._threads.items():
                if owner != name:
                    continue
                python = self._names.get(name, {}).get(tid)
                kind = "native" if python is None else _NUMBERED.sub("", python)
                cell = kinds[(kind, t.nice)]
                cell[0] += (t.last - t.first) / _TICKS
                cell[1] += 1
            at0 = sum(s for (_, nice), (s, _) in kinds.items() if nice <= 0)
            above = sum(s for (_, nice), (s, _) in kinds.items() if nice > 0)
            rows = sorted(kinds.items(), key=lambda kv: -kv[1][0])
            out[name] = {
                "cpu_s_nice0": round(at0, 2),
                "cpu_s_niced": round(above, 2),
                "threads": [
                    {"kind": kind, "nice": nice, "cpu_s": round(s, 2), "n": int(n)}
                    for (kind, nice), (s, n) in rows
                    if s >= least_s
                ],
            }
        return out
