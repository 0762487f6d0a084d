"""A Spark read through Strata cut into phases from its tasks' own timestamps
(`strata.spark.task_timing`, on when STRATA_SPARK_TASK_LOG names a file).

On a quiet machine a read's idle core-seconds are the time a core had nothing to run: before the
first task starts (Spark planning the query, the reader's `partitions()`), while a task waits for
its first batch, when one task has ended and the other still runs, and after the last (the job's
end). `phases` puts seconds on each, so `bench.spark_read_variants --task-log` can say which of
them a reader option shortens.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any


class TaskLog:
    """The lines appended to one log file since the last `take()`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.write_text("")
        self.offset = 0

    def take(self) -> list[dict[str, Any]]:
        with self.path.open("rb") as f:
            f.seek(self.offset)
            data = f.read()
        complete = data[: data.rfind(b"\n") + 1]
        self.offset += len(complete)
        return [json.loads(line) for line in complete.splitlines() if line.strip()]


def short_core_s(spans: list[tuple[float, float]], start: float, end: float, cores: int) -> float:
    """Core-seconds of `start`..`end` with fewer tasks running than cores: a core without a task
    (on a quiet machine, idle), whether before the first, between two or after the last."""
    events = sorted([(start, 0), (end, 0)] + [(a, 1) for a, _ in spans] + [(b, -1) for _, b in spans])
    short, running, last = 0.0, 0, start
    for t, step in events:
        t = min(max(t, start), end)
        short += max(0, cores - running) * (t - last)
        running, last = running + step, t
    return short


def phases(lines: list[dict[str, Any]], start: float, end: float, cores: int = 2) -> dict[str, float]:
    """Seconds of one read (`start`..`end`, epoch) by phase, from its `plan` and `task` lines."""
    plans = [p for p in lines if p["kind"] == "plan"]
    tasks = sorted((t for t in lines if t["kind"] == "task"), key=lambda t: t["start"])
    if not tasks:
        return {}
    ends = sorted(t["end"] for t in tasks)
    out = {
        "tasks": float(len(tasks)),
        "to first task s": tasks[0]["start"] - start,
        "plan s": sum(p["end"] - p["start"] for p in plans),
        "to plan s": (plans[0]["start"] - start) if plans else 0.0,
        "plan to first task s": (tasks[0]["start"] - plans[-1]["end"]) if plans else 0.0,
        # the first batch needs the files' schema checks and a first decode
        "first batch s (median task)": statistics.median(
            (t["first"] or t["end"]) - t["start"] for t in tasks
        ),
        "first and last task end apart s": ends[-1] - ends[0],
        "after last task s": end - ends[-1],
        "task s (median)": statistics.median(t["end"] - t["start"] for t in tasks),
        "core-s without a task": short_core_s([(t["start"], t["end"]) for t in tasks], start, end, cores),
        "core-s without a task, from first task": short_core_s(
            [(t["start"], t["end"]) for t in tasks], tasks[0]["start"], end, cores
        ),
    }
    for key in ("handing_s", "handing_cpu_s", "reader_cpu_s", "reader_blocked_s", "waited_for_reader_s"):
        out[f"tasks' {key.removesuffix('_s').replace('_', ' ')} s"] = sum(t[key] for t in tasks)
    return {k: round(v, 3) for k, v in out.items()}
