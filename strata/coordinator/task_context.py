"""What a task type's `run` is given, in the task's own process, and how it says it failed.

Kept apart from `task_process` (run as `__main__`): a task type raising `TaskFailed` must raise the
very class the process catches.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from strata.storage.metadata_store import MetadataStore, TransactionGuard
from strata.storage.task_store import Fenced, TaskRow, TaskStore
from timeline import Interval


class TaskFailed(Exception):
    """The task failed in a way it can describe: the message is its errorMsg, with a report."""

    def __init__(self, message: str, report: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.report = report


def coordinator_alive(parent_pid: int | None) -> bool:
    """Whether the coordinator that started this process is still its parent (a dead parent's
    children are re-parented, so `getppid` changes); True when run without one (tests, tools)."""
    return parent_pid is None or os.getppid() == parent_pid


def parent_from_env() -> int | None:
    """The coordinator's pid as it handed it down (`STRATA_PARENT_PID`), if any."""
    raw = os.environ.get("STRATA_PARENT_PID", "")
    return int(raw) if raw.isdigit() else None


@dataclass
class TaskContext:
    """What a task type's `run` is given."""

    row: TaskRow
    attempt: int
    metadata: MetadataStore
    tasks: TaskStore
    deep_storage: str
    s3_endpoint: str | None = None
    s3_region: str | None = None
    engine: str = "local"
    spark_master: str | None = None
    spark_conf: dict[str, str] = field(default_factory=dict)
    parent_pid: int | None = field(default_factory=parent_from_env)  # see `guard`

    @property
    def task_id(self) -> str:
        return self.row.id

    @property
    def payload(self) -> dict[str, Any]:
        return self.row.payload

    def guard(
        self,
        writes: Sequence[tuple[str, Interval]],
        *,
        publishes: bool,
        joins: Sequence[tuple[str, Interval, str]] = (),
    ) -> TransactionGuard:
        """The check a write of this task runs in its own transaction (see TaskStore.guard), after
        `coordinator_alive`: the parent-death signal is lost when the coordinator dies before the
        task process has asked for it, so the publish itself checks once more."""
        store_check = self.tasks.guard(self.task_id, self.attempt, writes, publishes=publishes, joins=joins)
        parent = self.parent_pid

        def check(conn: Any) -> None:
            if not coordinator_alive(parent):
                raise Fenced(f"task {self.task_id}: the coordinator that started it is gone; nothing was "
                             "written (the next coordinator runs the task again)")  # fmt: skip
            store_check(conn)

        return check


TaskRun = Callable[[TaskContext], dict[str, Any]]  # returns the task's report
