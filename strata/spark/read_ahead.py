"""A Spark task's batches made one step ahead of Spark, in a thread of the task's Python worker.

Spark's Python worker writes each batch a reader yields to the JVM, whose task thread turns it into
rows, and asks the reader for the next batch only once the write is done. Read in line, a task
then alternates: the JVM waits while Python reads and decodes the next batch (segment file pages,
a data node's answer), and Python waits while the JVM converts. Made in a thread instead (Arrow
decodes and casts without holding the GIL), the next batches are ready when the write is done, so
the worker's reading and the JVM's converting overlap and a task lasts about as long as the slower
of the two, not their sum. At most `depth` batches wait, so memory stays bounded.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from typing import TypeVar

from strata.spark.task_timing import AheadTimes

T = TypeVar("T")

DEPTH = 2  # batches made ahead of the one Spark is writing
_POLL_S = 0.1  # how often a producer blocked on a full queue checks whether the task stopped
_JOIN_S = 5.0  # how long a stopped task waits for the producer (it ends by itself after that)


@dataclass(frozen=True)
class _End:
    error: BaseException | None = None  # what the producer raised; None: every item was made


def read_ahead(
    items: Iterator[T], depth: int = DEPTH, times: AheadTimes | None = None
) -> Generator[T, None, None]:
    """`items` in order, made by a thread while the caller uses the earlier ones; an error raised
    making them is raised here. Closing this iterator early (Spark stops a task, a LIMIT) stops the
    thread, which closes `items` (its open files and responses). `times`, if given, gets what each
    side spent waiting for the other (strata.spark.task_timing)."""
    ready: queue.Queue[T | _End] = queue.Queue(maxsize=depth)
    stopped = threading.Event()

    def put(item: T | _End) -> bool:
        if times is not None:
            if times.first_ready is None:
                times.first_ready = time.time()
            if ready.full():
                t = time.perf_counter()
                stored = _put(item)
                times.producer_blocked += time.perf_counter() - t
                return stored
        return _put(item)

    def _put(item: T | _End) -> bool:
        while not stopped.is_set():
            try:
                ready.put(item, timeout=_POLL_S)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        end = _End()
        try:
            for item in items:
                if not put(item):
                    return
        except BaseException as e:  # handed to the consumer, which raises it in the task
            end = _End(e)
        finally:
            close = getattr(items, "close", None)
            if close is not None:
                close()
            if times is not None:
                times.producer_cpu = time.thread_time()
        put(end)

    thread = threading.Thread(target=produce, name="strata-read-ahead", daemon=True)
    thread.start()
    try:
        while True:
            if times is not None and ready.empty():
                t = time.perf_counter()
                item = ready.get()
                times.consumer_waited += time.perf_counter() - t
            else:
                item = ready.get()
            if isinstance(item, _End):
                if item.error is not None:
                    raise item.error
                return
            yield item
    finally:
        stopped.set()
        thread.join(_JOIN_S)
