"""Where a table read's wall time goes, task by task, when STRATA_SPARK_TASK_LOG names a file.

A full read keeps both sides of each task busy only if they overlap: the Python worker's
read-ahead thread making batches, its main thread handing them to the JVM, the JVM turning them
into rows. CPU figures cannot show time neither side had work (the planning before tasks start,
a task waiting for its first batch, one task ending before the other); per-task timestamps can.
With the variable set, the driver-side planning (`partitions()`) and every task append one JSON
line each to the file (`bench.spark_read_variants --task-log` reads them). Unset, nothing is
measured: the reader runs exactly as without this module.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from typing import Any

ENV = "STRATA_SPARK_TASK_LOG"


def timing_enabled() -> bool:
    return bool(os.environ.get(ENV))


def record(kind: str, **fields: Any) -> None:
    """One JSON line, appended with a single write (lines of several workers stay whole)."""
    path = os.environ.get(ENV)
    if not path:
        return
    line = json.dumps({"kind": kind, "pid": os.getpid(), **fields}) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


@dataclass
class AheadTimes:
    """What the read-ahead thread and the task's main thread spent, in seconds."""

    producer_cpu: float = 0.0  # the read-ahead thread's CPU (decoding, conforming)
    producer_blocked: float = 0.0  # the read-ahead thread waiting: `depth` batches ready
    consumer_waited: float = 0.0  # the main thread waiting for the read-ahead thread's next batch
    first_ready: float | None = None  # epoch seconds the first batch was ready


def timed_task(batches: Iterator[Any], times: AheadTimes, **fields: Any) -> Generator[Any, None, None]:
    """`batches` unchanged; once they end (or the task stops), one `task` line: its start, first
    batch handed on and end (epoch seconds), rows, the main thread's time handing batches to Spark
    (its wall time away from this generator: Spark writing the batch to the JVM, which blocks
    while the JVM has not taken the last) and that time's CPU, and `times`."""
    start = time.time()
    first: float | None = None
    rows = 0
    away = away_cpu = 0.0
    try:
        for batch in batches:
            if first is None:
                first = time.time()
            rows += batch.num_rows
            t, cpu = time.perf_counter(), time.thread_time()
            yield batch
            away += time.perf_counter() - t
            away_cpu += time.thread_time() - cpu
    finally:
        record(
            "task",
            start=start,
            first=first,
            end=time.time(),
            rows=rows,
            handing_s=round(away, 4),
            handing_cpu_s=round(away_cpu, 4),
            reader_cpu_s=round(times.producer_cpu, 4),
            reader_blocked_s=round(times.producer_blocked, 4),
            waited_for_reader_s=round(times.consumer_waited, 4),
            first_ready=times.first_ready,
            **fields,
        )
