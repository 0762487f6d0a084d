"""Spark's own record of each read's jobs and tasks (its event log), cut into the same phases for
a read through Strata and for Spark reading the files.

`bench.spark_task_phases` times a Strata read from inside its Python workers; Spark's direct read
has no such side. Spark's event log (`spark.eventLog.enabled`) has, for every job of either, its
submission and completion and each task's launch, finish, run time and CPU time, so the two reads'
time without a task (before the first, between two, after the last) can be set side by side.
`enable(folder)` must run before the session starts; `read_jobs` parses the log after it stops.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from bench.spark_task_phases import short_core_s


@dataclass
class Job:
    submitted: float  # epoch seconds
    completed: float = 0.0
    stages: list[int] = field(default_factory=list)
    # (launch, finish) epoch seconds, executor run seconds, executor CPU seconds
    tasks: list[tuple[float, float, float, float]] = field(default_factory=list)


def enable(folder: Path) -> None:
    """Spark's event log into `folder` for the session started next in this process."""
    folder.mkdir(parents=True, exist_ok=True)
    args = f"--conf spark.eventLog.enabled=true --conf spark.eventLog.dir=file://{folder.resolve()}"
    os.environ["PYSPARK_SUBMIT_ARGS"] = f"{args} pyspark-shell"


def _lines(folder: Path) -> Iterator[str]:
    """The event log's lines: Spark 4 writes a folder per application (`eventlog_v2_*`) of
    zstd-compressed `events_N_*` files."""
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and "events" in p.name):
        if path.suffix == ".zstd":
            with pa.CompressedInputStream(pa.OSFile(str(path)), "zstd") as stream:
                text = stream.read().decode()
        else:
            text = path.read_text()
        yield from (line for line in text.splitlines() if line.startswith("{"))


def read_jobs(folder: Path) -> list[Job]:
    jobs: dict[int, Job] = {}
    stage_job: dict[int, int] = {}
    for event in map(json.loads, _lines(folder)):
        kind = event.get("Event")
        if kind == "SparkListenerJobStart":
            job = Job(event["Submission Time"] / 1000, stages=list(event["Stage IDs"]))
            jobs[event["Job ID"]] = job
            stage_job.update((s, event["Job ID"]) for s in job.stages)
        elif kind == "SparkListenerJobEnd" and event["Job ID"] in jobs:
            jobs[event["Job ID"]].completed = event["Completion Time"] / 1000
        elif kind == "SparkListenerTaskEnd" and event["Stage ID"] in stage_job:
            info, metrics = event["Task Info"], event.get("Task Metrics") or {}
            jobs[stage_job[event["Stage ID"]]].tasks.append(
                (info["Launch Time"] / 1000, info["Finish Time"] / 1000,
                 metrics.get("Executor Run Time", 0) / 1000, metrics.get("Executor CPU Time", 0) / 1e9)
            )  # fmt: skip
    return sorted(jobs.values(), key=lambda j: j.submitted)


def phases(jobs: list[Job], start: float, end: float, cores: int = 2) -> dict[str, float]:
    """The tasks of the jobs submitted within `start`..`end` (one read), by Spark's clock."""
    tasks = sorted(t for j in jobs if start <= j.submitted <= end for t in j.tasks)
    if not tasks:
        return {}
    ends = sorted(t[1] for t in tasks)
    spans = [(t[0], t[1]) for t in tasks]
    out = {
        "spark: tasks": float(len(tasks)),
        "spark: to first task s": tasks[0][0] - start,
        "spark: last two tasks end apart s": ends[-1] - ends[-2] if len(ends) > 1 else 0.0,
        "spark: after last task s": end - ends[-1],
        "spark: core-s without a task": short_core_s(spans, start, end, cores),
        "spark: core-s without a task, first to last task": short_core_s(spans, tasks[0][0], ends[-1], cores),
        "spark: task run s": sum(t[2] for t in tasks),
        "spark: task cpu s": sum(t[3] for t in tasks),
    }
    return {k: round(v, 3) for k, v in out.items()}
