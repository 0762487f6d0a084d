"""Per-task timing behind STRATA_SPARK_TASK_LOG: nothing written unset; set, one line per task
with its rows and timestamps in order, and each side's waits (end to end in bench.spark_read_variants
--task-log)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from strata.spark import task_timing
from strata.spark.read_ahead import read_ahead


def batches(count: int, rows: int, pause: float = 0.0, first_pause: float = 0.0) -> Iterator[pa.RecordBatch]:
    for i in range(count):
        time.sleep(first_pause if i == 0 else pause)
        yield pa.record_batch({"x": pa.array(range(i * rows, (i + 1) * rows))})


def test_unset_nothing_is_measured_or_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(task_timing.ENV, raising=False)
    assert not task_timing.timing_enabled()
    task_timing.record("plan", start=0.0, end=1.0)
    assert list(tmp_path.iterdir()) == []


def test_a_task_logs_its_rows_timestamps_and_waits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / "tasks.log"
    monkeypatch.setenv(task_timing.ENV, str(log))
    assert task_timing.timing_enabled()
    times = task_timing.AheadTimes()
    before = time.time()
    got = []
    # the reader takes 250 ms over its first batch, then 20 ms a batch, and the consumer takes 50 ms
    # over each: the consumer waits for the first, then the reader for room in the queue. The
    # margins are wide: on a loaded host the consumer can start late (once, 20 ms later than the
    # reader's first batch, it did not wait at all)
    reader = read_ahead(batches(10, 100, 0.02, first_pause=0.25), 2, times)
    for batch in task_timing.timed_task(reader, times, files=3):
        got.append(batch)
        time.sleep(0.05)
    task_timing.record("plan", start=1.0, end=2.0, partitions=2)
    (task, plan) = [json.loads(line) for line in log.read_text().splitlines()]
    assert [b.num_rows for b in got] == [100] * 10 and task["rows"] == 1000
    assert before <= task["start"] <= task["first_ready"] <= task["first"] <= task["end"] <= time.time()
    assert task["files"] == 3 and task["kind"] == "task" and plan["kind"] == "plan"
    assert 10 * 0.05 <= task["handing_s"] < task["end"] - task["start"]  # the consumer's time away
    assert task["waited_for_reader_s"] >= 0.1  # most of the first batch's 250 ms
    assert task["reader_blocked_s"] > 0  # the reader, faster, waited for room in the queue
