"""What a task type's `run` is given, in the task's own process, and how it says it failed.

Kept apart from `task_process` (run as `__main__`): a task type raising `TaskFailed` must raise the
very class the process catches.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from strata.storage.metadata_store import MetadataStore, TransactionGuard
from strata.storage.task_store import TaskRow, TaskStore
from timeline import Interval


class TaskFailed(Exception):
    """The task failed in a way it can describe: the message is its errorMsg, with a report."""

    def __init__(self, message: str, report: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.report = report


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
        """The check a write of this task runs in its own transaction (see TaskStore.guard)."""
        return self.tasks.guard(self.task_id, self.attempt, writes, publishes=publishes, joins=joins)


TaskRun = Callable[[TaskContext], dict[str, Any]]  # returns the task's report
