"""Tasks in flight, with real processes: a task shut down or killed at its publish publishes nothing;
a coordinator killed under a running task starts it again (or fails it, saying why) and the task
publishes once; tasks on overlapping intervals wait for each other's locks, never publishing over
each other, while tasks on other intervals run beside them; appends sharing a lock never hide each
other. Every task is held at its publish (every segment pushed, none published) by
hold_publish/sitecustomize.py while the test acts; answers are checked against the raw rows."""

from __future__ import annotations

import os
import signal
import time
from contextlib import closing
from pathlib import Path
from typing import Any

import httpx
import pyarrow.parquet as pq
import pytest

from harness.processes import StrataProcess, running
from strata.storage import open_metadata_store
from strata.storage.task_store import TaskStore
from tests.coordinator.kit import (
    TASKS,
    coordinator,
    rows_spec,
    status,
    submit,
    wait_for,
    wait_publishing,
    write_rows,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

D1, D2 = "2020-01-01", "2020-01-02"


def day_rows(day: str, n: int, offset: int = 0, first_hour: int = 0) -> list[dict[str, Any]]:
    hours = 24 - first_hour
    return [{"ts": f"{day}T{first_hour + h % hours:02d}:{h // hours:02d}:00Z", "k": f"v{h % 3}", "n": offset + h}
            for h in range(n)]  # fmt: skip


def used_totals(meta: str, ds: str) -> tuple[int, int]:
    """(rows, sum of n) over the used segments' files: what queries would read."""
    with closing(open_metadata_store(meta)) as store:
        segments = store.used_segments(ds)
    tables = [pq.read_table(s.load_spec["path"]) for s in segments]
    return sum(t.num_rows for t in tables), sum(int(t.column("n").to_numpy().sum()) for t in tables)


def oracle(rows: list[dict[str, Any]]) -> tuple[int, int]:
    return len(rows), sum(r["n"] for r in rows)


def segment_rows(meta: str, ds: str) -> list[tuple[str, bool]]:
    with closing(open_metadata_store(meta)) as store:
        return [(r.segment.id, r.used) for r in store.segments(ds, include_unused=True)]


def pushed_files(tmp_path: Path, ds: str) -> list[Path]:
    return sorted((tmp_path / "deep" / ds).glob("*/*/*/index.parquet"))


def gone(pid: int, timeout: float = 30) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


def held_pid(marker: Path) -> int:
    return int(marker.name.split("-", 1)[1])


def task_log(node: Any, task_id: str) -> str:
    return httpx.get(f"{node.url}{TASKS}/task/{task_id}/log", timeout=30).text


@pytest.mark.parametrize("how", ["shutdown", "sigkill"])
def test_a_task_stopped_mid_flight_publishes_nothing(tmp_path: Path, how: str) -> None:
    meta, hold = str(tmp_path / "meta.db"), tmp_path / "hold"
    rows = write_rows(tmp_path / "rows.json", day_rows(D1, 48))
    node = coordinator(tmp_path, meta, hold=hold)
    (hold / "hold").touch()
    with running([node]):
        node.start()
        task_id = submit(node, rows_spec("w", rows, intervals=[f"{D1}/{D2}"]))
        pid = held_pid(wait_publishing(hold, 1)[0])
        assert pushed_files(tmp_path, "w"), "the task pushed its segment before its publish"
        if how == "shutdown":
            resp = httpx.post(f"{node.url}{TASKS}/task/{task_id}/shutdown", timeout=30)
            assert resp.status_code == 200 and resp.json() == {"task": task_id}
        else:
            os.kill(pid, signal.SIGKILL)
        failed = wait_for(node, task_id, "FAILED")
        assert gone(pid)
        if how == "shutdown":
            assert failed["errorMsg"] == "Shutdown request from user"  # Druid's words
            assert pushed_files(tmp_path, "w") == []  # its clean-up removed what it pushed
        else:
            assert "killed by SIGKILL" in failed["errorMsg"] and "nothing was published" in failed["errorMsg"]
        (hold / "hold").unlink()
        time.sleep(1.0)  # a process that survived would publish now
        assert segment_rows(meta, "w") == []
        with closing(open_metadata_store(meta)) as store:
            assert TaskStore(store).locks() == []
        # its interval is free again: the same spec runs to the end
        again = submit(node, rows_spec("w", rows, intervals=[f"{D1}/{D2}"]))
        assert wait_for(node, again, "SUCCESS")["errorMsg"] is None
    assert used_totals(meta, "w") == oracle(day_rows(D1, 48))


def killed_under_a_task(tmp_path: Path, rows: list[dict[str, Any]], *extra: str) -> tuple[str, StrataProcess]:
    """A coordinator SIGKILLed while its task is held at its publish (its process dying with it),
    and a second one started on the same address and store; returns the task id and the second."""
    meta, hold = str(tmp_path / "meta.db"), tmp_path / "hold"
    first = coordinator(tmp_path, meta, *extra, hold=hold)
    (hold / "hold").touch()
    with running([first]):
        first.start()
        task_id = submit(
            first, rows_spec("w", write_rows(tmp_path / "rows.json", rows), intervals=[f"{D1}/{D2}"])
        )
        pid = held_pid(wait_publishing(hold, 1)[0])
        first.kill()  # SIGKILL: no clean stop; the task process dies with it
        assert gone(pid), "the task's process outlived its coordinator"
    (hold / "hold").unlink()
    return task_id, coordinator(tmp_path, meta, *extra, hold=hold, name="coordinator-2", port=first.port)


def test_a_coordinator_killed_under_a_task_starts_it_again_and_it_publishes_once(tmp_path: Path) -> None:
    task_id, second = killed_under_a_task(tmp_path, day_rows(D1, 30))
    with running([second]):
        second.start()
        done = wait_for(second, task_id, "SUCCESS")
        assert done["errorMsg"] is None
        log = task_log(second, task_id)
        assert "the coordinator restarted while attempt 1 ran" in log and "attempt 2 started" in log
    meta = str(tmp_path / "meta.db")
    ids = segment_rows(meta, "w")
    assert len(ids) == 1 and all(used for _, used in ids)  # one day, published once, nothing else
    assert used_totals(meta, "w") == oracle(day_rows(D1, 30))


def test_with_no_restarts_left_the_task_fails_saying_why(tmp_path: Path) -> None:
    task_id, second = killed_under_a_task(tmp_path, day_rows(D1, 10), "--task-restarts", "0")
    with running([second]):
        second.start()
        failed = wait_for(second, task_id, "FAILED")
    assert "The coordinator restarted while this task ran (attempt 1)" in failed["errorMsg"]
    assert "nothing of it was published" in failed["errorMsg"]
    assert segment_rows(str(tmp_path / "meta.db"), "w") == []


def test_overlapping_tasks_wait_for_each_other_and_others_run_beside_them(tmp_path: Path) -> None:
    meta, hold = str(tmp_path / "meta.db"), tmp_path / "hold"
    first_rows, second_rows = day_rows(D1, 24), day_rows(D1, 12, offset=1000, first_hour=12)
    other_rows = day_rows(D2, 6, offset=5000)
    node = coordinator(tmp_path, meta, "--task-slots", "3", hold=hold)
    (hold / "hold").touch()
    with running([node]):
        node.start()
        a = submit(
            node, rows_spec("w", write_rows(tmp_path / "a.json", first_rows), intervals=[f"{D1}/{D2}"])
        )
        wait_publishing(hold, 1)
        b = submit(node, rows_spec("w", write_rows(tmp_path / "b.json", second_rows),
                                   intervals=[f"{D1}T12:00:00Z/{D2}"]))  # fmt: skip
        c = submit(
            node, rows_spec("w", write_rows(tmp_path / "c.json", other_rows), intervals=[f"{D2}/2020-01-03"])
        )
        wait_publishing(hold, 2)  # the other day's task reached its publish beside the first
        for _ in range(10):  # the overlapping one waits for the lock all along
            assert status(node, b)["runnerStatusCode"] == "WAITING"
            time.sleep(0.1)
        waiting = httpx.get(f"{node.url}{TASKS}/waitingTasks", timeout=30).json()
        assert [t["id"] for t in waiting] == [b]
        running_now = httpx.get(f"{node.url}{TASKS}/runningTasks", timeout=30).json()
        assert {t["id"] for t in running_now} == {a, c}
        (hold / "hold").unlink()
        for task_id in (a, b, c):
            assert wait_for(node, task_id, "SUCCESS")["errorMsg"] is None
    with closing(open_metadata_store(meta)) as store:
        records = store.segments("w", include_unused=True)
    day1 = [r for r in records if r.segment.interval.start == records[0].segment.interval.start]
    assert sorted((r.segment.version, r.used) for r in day1) == [(day1[0].segment.version, False),
                                                                 (max(r.segment.version for r in day1), True)]  # fmt: skip
    assert used_totals(meta, "w") == oracle(second_rows + other_rows)  # the later overwrite, whole


def test_appends_sharing_a_lock_run_together_and_never_hide_each_other(tmp_path: Path) -> None:
    meta, hold = str(tmp_path / "meta.db"), tmp_path / "hold"
    base = day_rows(D1, 12)
    node = coordinator(tmp_path, meta, "--task-slots", "3", hold=hold)
    with running([node]):
        node.start()
        first = submit(
            node, rows_spec("w", write_rows(tmp_path / "base.json", base), intervals=[f"{D1}/{D2}"])
        )
        assert wait_for(node, first, "SUCCESS")["errorMsg"] is None
        (hold / "hold").touch()
        appends = [day_rows(D1, 5, offset=100), day_rows(D1, 7, offset=200)]
        ids = [
            submit(node, rows_spec("w", write_rows(tmp_path / f"more{i}.json", rows), append=True,
                                   intervals=[f"{D1}/{D2}"], context={"taskLockType": "APPEND"}))
            for i, rows in enumerate(appends)
        ]  # fmt: skip
        wait_publishing(hold, 2)  # the base's publish, then an append's, held there
        deadline = time.monotonic() + 60  # the other append got its lock meanwhile: none waits
        while any(status(node, i)["runnerStatusCode"] in ("WAITING", "PENDING") for i in ids):
            assert time.monotonic() < deadline, [status(node, i) for i in ids]
            time.sleep(0.1)
        (hold / "hold").unlink()
        ends = {task_id: wait_for(node, task_id, "SUCCESS", "FAILED") for task_id in ids}
    won = [i for i, task_id in enumerate(ids) if ends[task_id]["statusCode"] == "SUCCESS"]
    assert len(won) >= 1
    for i, task_id in enumerate(ids):
        if i not in won:
            assert ends[task_id]["errorMsg"], ends[task_id]  # refused, saying why; nothing of it published
    assert used_totals(meta, "w") == oracle(base + [r for i in won for r in appends[i]])
