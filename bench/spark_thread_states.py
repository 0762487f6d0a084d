"""How often a Spark read had fewer runnable threads than cores, sampled from /proc, and which of
its threads were waiting then.

A read through Strata wastes a core when every thread that could use it waits for another: Spark's
task thread for its Python worker's next bytes, the worker's main thread for the JVM to take the
last batch (or for the GIL), the worker's read-ahead thread for room in its queue. On a shared
machine those cores do not show as idle (other work fills them), but the read's own threads still
wait for each other the same way: a thread waiting for a core is runnable (`R`), one waiting for
another thread sleeps. So `ThreadStates` samples every thread of Spark's JVM and Python workers and
counts the samples with fewer runnable threads than cores, a share of the read that would be idle
on a quiet machine, and for those samples what each of the task's threads was doing (running, or
the system call it slept in: `futex` a lock or the GIL, `read`/`recvfrom` a socket, ...).
"""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

SYSCALLS = {0: "read", 1: "write", 7: "poll", 23: "select", 44: "sendto", 45: "recvfrom", 202: "futex",
            232: "epoll_wait", 281: "epoll_pwait", 35: "nanosleep", 230: "clock_nanosleep", 270: "pselect6",
            271: "ppoll", 20: "writev", 46: "sendmsg", 47: "recvmsg"}  # fmt: skip


def _state(pid: int, tid: int) -> tuple[str, str]:
    """(comm, state letter) of one thread; ('', '') once it is gone."""
    try:
        raw = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
    except OSError:
        return "", ""
    head, _, tail = raw.rpartition(")")
    return head.partition("(")[2], tail.split()[0]


def _syscall(pid: int, tid: int) -> str:
    try:
        number = Path(f"/proc/{pid}/task/{tid}/syscall").read_text().split()[0]
    except (OSError, IndexError):
        return "?"
    return "running" if number == "running" else SYSCALLS.get(int(number), f"sys{number}")


def _role(kind: str, pid: int, tid: int, comm: str) -> str:
    if kind == "jvm":
        return "jvm task" if comm.startswith("Executor task") else "jvm other"
    return "py main" if tid == pid else "py thread"


class ThreadStates:
    """Samples, every `period` s while entered, the threads of `processes()` (pid -> 'jvm' or
    'python'), Spark's JVM and its Python workers."""

    def __init__(self, processes: Callable[[], dict[int, str]], cores: int, period: float = 0.005) -> None:
        self.processes = processes
        self.cores = cores
        self.period = period
        self.samples = 0
        self.short = 0  # samples with fewer runnable threads than cores
        self.none = 0  # samples with no runnable thread
        self.waiting: Counter[str] = Counter()  # in short samples: role and what it did
        self.runnable: Counter[str] = Counter()  # in all samples: runnable threads per role
        self._threads: list[tuple[int, int, str]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _list(self) -> None:
        threads = []
        for pid, kind in self.processes().items():
            try:
                tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
            except OSError:
                continue
            threads += [(pid, tid, kind) for tid in tids]
        self._threads = threads

    def _sample(self) -> None:
        states = []
        for pid, tid, kind in self._threads:
            comm, state = _state(pid, tid)
            if state:
                states.append((pid, tid, _role(kind, pid, tid, comm), state))
        running = [s for s in states if s[3] == "R"]
        self.samples += 1
        for *_, role, _ in running:
            self.runnable[role] += 1
        if len(running) >= self.cores:
            return
        self.short += 1
        self.none += not running
        for pid, tid, role, state in states:
            if role in ("jvm task", "py main", "py thread"):
                self.waiting[f"{role}: {'R' if state == 'R' else _syscall(pid, tid)}"] += 1

    def _run(self) -> None:
        listed = 0.0
        while not self._stop.wait(self.period):
            if time.monotonic() - listed > 0.1:  # tasks start threads, workers come and go
                self._list()
                listed = time.monotonic()
            self._sample()

    def __enter__(self) -> ThreadStates:
        self._list()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def figures(self) -> dict[str, float]:
        n = max(1, self.samples)
        out = {"samples": float(self.samples), "share short of cores": self.short / n,
               "share nothing runnable": self.none / n}  # fmt: skip
        out.update({f"runnable {role} (mean)": count / n for role, count in sorted(self.runnable.items())})
        short = max(1, self.short)
        out.update({f"when short, {what}": c / short for what, c in self.waiting.most_common(12)})
        return {k: round(v, 3) for k, v in out.items()}
