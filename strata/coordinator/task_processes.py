"""Starting and stopping tasks' processes, each exactly by its own process group.

A task's process is `python -m strata.coordinator.task_process` in a session of its own (so its
process group holds it and whatever it starts, Spark's JVM included), with its output appended to
the task's log. It is tied to the coordinator: util-linux's `setpriv --pdeathsig TERM` (no Python
runs between fork and exec, safe in a process with threads) and a watch on the parent pid inside
the task process. Children must be started from a thread that outlives them (the event loop's):
the parent-death signal follows the thread that forked.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from strata.coordinator.task_logs import TaskLogs

log = logging.getLogger("strata.coordinator")

ENTRY = "strata.coordinator.task_process"


@dataclass(frozen=True)
class RunnerSettings:
    metadata: str
    deep_storage: str
    s3_endpoint: str | None = None
    s3_region: str | None = None
    engine: str = "local"
    spark_master: str | None = None
    spark_conf: tuple[str, ...] = ()
    task_slots: int = 2
    task_restarts: int = 2  # times a task is started again after the coordinator restarted under it
    stop_grace_s: float = 10.0
    env: dict[str, str] = field(default_factory=dict)  # extra environment for task processes


@dataclass
class TaskProcess:
    task_id: str
    attempt: int
    proc: subprocess.Popen[bytes]
    stopping_since: float | None = None  # monotonic time of the SIGTERM a shutdown sent

    @property
    def pid(self) -> int:
        return self.proc.pid


class ProcessLauncher:
    def __init__(self, settings: RunnerSettings, logs: TaskLogs) -> None:
        self.settings = settings
        self.logs = logs

    def argv(self, task_id: str, attempt: int) -> list[str]:
        s = self.settings
        argv = [sys.executable, "-P", "-m", ENTRY, "--task-id", task_id, "--attempt", str(attempt),
                "--deep-storage", s.deep_storage, "--engine", s.engine]  # fmt: skip
        for flag, value in (("--s3-endpoint", s.s3_endpoint), ("--s3-region", s.s3_region),
                            ("--spark-master", s.spark_master)):  # fmt: skip
            if value:
                argv += [flag, value]
        for item in s.spark_conf:
            argv += ["--spark-conf", item]
        if shutil.which("setpriv"):
            argv = ["setpriv", "--pdeathsig", "TERM", "--", *argv]
        return argv

    def start(self, task_id: str, attempt: int) -> TaskProcess:
        env = {**os.environ, **self.settings.env, "STRATA_METADATA": self.settings.metadata,
               "STRATA_PARENT_PID": str(os.getpid())}  # fmt: skip
        with self.logs.path(task_id).open("ab") as out:
            proc = subprocess.Popen(
                self.argv(task_id, attempt), stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                env=env, start_new_session=True,
            )  # fmt: skip
        return TaskProcess(task_id, attempt, proc)

    @staticmethod
    def signal_group(child: TaskProcess, sig: int) -> None:
        """`sig` to the child's own process group (its pid: it leads the session it started)."""
        if child.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(child.pid, sig)


def is_task_process(pid: int, task_id: str) -> bool:
    """Whether `pid` is (still) a task process of ours for `task_id` leading its own group: a
    coordinator restarting checks this before it stops a process its predecessor started."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    fields = stat.rsplit(")", 1)[-1].split()
    process_group = int(fields[2]) if len(fields) > 2 else -1
    return ENTRY.encode() in cmdline and task_id.encode() in cmdline and process_group == pid


def kill_orphan(pid: int | None, task_id: str) -> bool:
    """SIGKILL the process group a previous coordinator started for the task, if it still runs."""
    if pid is None or not is_task_process(pid, task_id):
        return False
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    log.warning("task %s: stopped process %d left by the previous coordinator", task_id, pid)
    return True
