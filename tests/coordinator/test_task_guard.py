"""A task's publish checks that the coordinator which started it is still its parent, in the publish's
own transaction: the parent-death signal is lost when the coordinator dies before the task process
has armed it, and such an orphan must publish nothing (the next coordinator runs the task again).
Real SQLite metadata store, real publish."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

from strata.coordinator.task_context import TaskContext, coordinator_alive
from strata.storage import open_metadata_store
from strata.storage.metadata_store import MetadataStore
from strata.storage.task_store import Fenced, TaskRow, TaskStore
from timeline import DataSegment, Interval

DAY = Interval.parse("2020-01-01/2020-01-02")


@pytest.fixture
def meta(tmp_path: Path) -> Iterator[MetadataStore]:
    with closing(open_metadata_store(str(tmp_path / "m.db"))) as store:
        yield store


def _running_task(meta: MetadataStore, parent_pid: int | None) -> TaskContext:
    tasks = TaskStore(meta)
    row = TaskRow("t1", "2020-01-01T00:00:00.000Z", "w", "index_parallel", "t1", {}, {}, attempt=1)
    tasks.insert(row)
    granted = tasks.grant("t1", "w", lambda held: [{"dataSource": "w", "interval": str(DAY)}])
    assert granted
    return TaskContext(row, 1, meta, tasks, "unused", parent_pid=parent_pid)


def _publish(ctx: TaskContext) -> None:
    segment = DataSegment("w", DAY, "v1", {"type": "local", "path": "/x"}, ("k",), ())
    ctx.metadata.publish([segment], overwrite=False, guard=ctx.guard([("w", DAY)], publishes=True))


def _not_our_parent() -> int:
    return os.getpid()  # never our own parent


def test_an_orphaned_task_publishes_nothing(meta: MetadataStore) -> None:
    ctx = _running_task(meta, parent_pid=_not_our_parent())
    with pytest.raises(Fenced, match="coordinator that started it is gone"):
        _publish(ctx)
    assert meta.used_segments("w") == []
    found = ctx.tasks.get("t1")
    assert found is not None and not found.published


def test_a_task_under_its_coordinator_publishes(meta: MetadataStore) -> None:
    ctx = _running_task(meta, parent_pid=os.getppid())
    _publish(ctx)
    assert [str(s.interval) for s in meta.used_segments("w")] == [str(DAY)]
    found = ctx.tasks.get("t1")
    assert found is not None and found.published


def test_without_a_coordinator_pid_only_the_store_decides() -> None:
    assert coordinator_alive(None)
    assert coordinator_alive(os.getppid())
    assert not coordinator_alive(_not_our_parent())
