"""Each task's log: one file per task under the coordinator's `--task-log-dir`, holding its process's
output (every attempt) and the coordinator's notes about it (started, shut down, restarted).

Served by `GET /druid/indexer/v1/task/{id}/log?offset=N` as Druid serves task logs: text from byte
`offset` (a negative offset counts from the end).
"""

from __future__ import annotations

import time
from pathlib import Path


class TaskLogs:
    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory).resolve()
        self.directory.mkdir(parents=True, exist_ok=True)

    def path(self, task_id: str) -> Path:
        """Task ids never hold '/' nor start with '.' (task_types.check_id), so this stays inside."""
        return self.directory / f"{task_id}.log"

    def note(self, task_id: str, message: str) -> None:
        """A line of the coordinator's own, in the servers' log format."""
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime())
        with self.path(task_id).open("a", encoding="utf-8") as f:
            f.write(f"{stamp} INFO    strata.coordinator: {message}\n")

    def read(self, task_id: str, offset: int = 0) -> bytes | None:
        """The log from byte `offset` (from the end when negative); None when there is none."""
        path = self.path(task_id)
        try:
            with path.open("rb") as f:
                size = f.seek(0, 2)
                f.seek(max(0, size + offset) if offset < 0 else min(offset, size))
                return f.read()
        except FileNotFoundError:
            return None
