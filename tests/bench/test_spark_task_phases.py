"""The phases of a Spark read from its tasks' timestamps (bench.spark_task_phases) and from Spark's
event log (bench.spark_event_log): core-seconds without a task, worked out by hand."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench.spark_event_log import phases as spark_phases
from bench.spark_event_log import read_jobs
from bench.spark_task_phases import phases, short_core_s


def test_core_seconds_without_a_task() -> None:
    # 2 cores over 0..6: none running to 1 (2), both to 3 (0), one to 5 (2), none to 6 (2)
    assert short_core_s([(1, 5), (1, 3)], 0, 6, 2) == 6
    # a third task starts as one ends: only 0..1 and 5..6 are short
    assert short_core_s([(1, 3), (3, 5), (1, 5)], 0, 6, 2) == 4
    assert short_core_s([], 0, 2, 2) == 4


def test_phases_of_two_tasks_ending_apart() -> None:
    def task(start: float, first: float, end: float) -> dict[str, Any]:
        return {"kind": "task", "start": start, "first": first, "end": end, "handing_s": 1.0,
                "handing_cpu_s": 0.1, "reader_cpu_s": 0.5, "reader_blocked_s": 0.2,
                "waited_for_reader_s": 0.3}  # fmt: skip

    lines = [
        {"kind": "plan", "start": 100.1, "end": 100.2},
        task(100.5, 100.6, 103.0),
        task(100.5, 100.7, 102.0),
    ]
    got = phases(lines, 100.0, 103.5)
    assert got["to first task s"] == 0.5 and got["plan s"] == 0.1 and got["plan to first task s"] == 0.3
    assert got["first and last task end apart s"] == 1.0 and got["after last task s"] == 0.5
    assert got["core-s without a task"] == 0.5 * 2 + 1.0 + 0.5 * 2
    assert got["tasks' handing s"] == 2.0 and got["tasks' waited for reader s"] == 0.6


def test_spark_event_log_jobs_and_phases(tmp_path: Path) -> None:
    events = [
        {"Event": "SparkListenerJobStart", "Job ID": 0, "Submission Time": 100_000, "Stage IDs": [0]},
        {"Event": "SparkListenerTaskEnd", "Stage ID": 0, "Task Info": {"Launch Time": 100_200, "Finish Time": 102_000},
         "Task Metrics": {"Executor Run Time": 1700, "Executor CPU Time": 1_500_000_000}},
        {"Event": "SparkListenerTaskEnd", "Stage ID": 0, "Task Info": {"Launch Time": 100_200, "Finish Time": 103_000},
         "Task Metrics": {"Executor Run Time": 2700, "Executor CPU Time": 2_000_000_000}},
        {"Event": "SparkListenerJobEnd", "Job ID": 0, "Completion Time": 103_100},
        {"Event": "SparkListenerJobStart", "Job ID": 1, "Submission Time": 200_000, "Stage IDs": [1]},
        {"Event": "SparkListenerTaskEnd", "Stage ID": 1, "Task Info": {"Launch Time": 200_100, "Finish Time": 201_000}},
    ]  # fmt: skip
    (tmp_path / "eventlog_v2_local-1").mkdir()  # Spark 4's layout, here uncompressed
    (tmp_path / "eventlog_v2_local-1" / "events_1_local-1").write_text("\n".join(map(json.dumps, events)))
    jobs = read_jobs(tmp_path)
    assert [len(j.tasks) for j in jobs] == [2, 1] and jobs[0].completed == 103.1
    got = spark_phases(jobs, 100.0, 103.2)  # the first job only
    assert got["spark: tasks"] == 2 and got["spark: to first task s"] == 0.2
    assert got["spark: last two tasks end apart s"] == 1.0 and got["spark: after last task s"] == 0.2
    assert got["spark: core-s without a task"] == pytest.approx(0.2 * 2 + 1.0 + 0.2 * 2)
    assert got["spark: task cpu s"] == 3.5 and got["spark: task run s"] == 4.4
