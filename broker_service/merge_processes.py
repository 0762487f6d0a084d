"""Large merges in worker processes, off the broker's interpreter.

Merging and finalizing a groupBy of 100,000 groups is a second and more of Python in one thread: in
the broker's process it holds the interpreter lock against the event loop and every other query,
so one heavy statement slows every cheap one. A merge of at least `min_rows` partial rows runs
instead in one of `--merge-processes` worker processes (started with `spawn`: the broker has
threads): the partials go there as Arrow, the answer comes back as its JSON bytes. Cheap merges
stay in the broker (a process hop would cost more than they do), and at most that many cores
merge heavy answers at once, whatever arrives. A query of negative context priority (Druid's low
lane) is merged on a thread of the worker at nice 10, as the data nodes run its scan: when the
host's cores are busy, the kernel serves everything else first.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor

import pyarrow as pa

from strata.query import Query
from strata.server.thread_priority import LOW_NICE, lower_own_priority

MIN_ROWS = 50_000  # partial rows from which a merge goes to a worker process
PARENT_POLL_S = 1.0
Merge = Callable[[Query, list[pa.Table], int, bool], bytes]  # the answer's JSON


def _encoded(
    merge: Merge, query: Query, partials: list[pa.Table], max_rows: int, one_node_merged: bool
) -> bytes:
    """In the worker: a low-priority query's merge runs on a thread at a raised nice value (a
    thread may raise its own, never lower it back: so a thread of its own, ended with the merge)."""
    if query.context.priority >= 0:
        return merge(query, partials, max_rows, one_node_merged)
    answer: list[bytes] = []
    failure: list[BaseException] = []

    def low() -> None:
        lower_own_priority(LOW_NICE)
        try:
            answer.append(merge(query, partials, max_rows, one_node_merged))
        except BaseException as e:  # raised again in the worker's own thread, to the broker
            failure.append(e)

    thread = threading.Thread(target=low, name="merge-low")
    thread.start()
    thread.join()
    if failure:
        raise failure[0]
    return answer[0]


def _outlive_no_broker(broker: int) -> None:
    """In each worker: exit as soon as the broker is gone, however it went (kill -9 included); a
    worker waiting for work would otherwise stay, orphaned, holding its memory."""

    def watch() -> None:
        while os.getppid() == broker:
            time.sleep(PARENT_POLL_S)
        os._exit(0)

    threading.Thread(target=watch, name="broker-watch", daemon=True).start()


def _ready() -> bool:
    import strata.query.all_types  # noqa: F401 - the query language every merge uses

    return True


class MergeProcesses:
    def __init__(self, processes: int, min_rows: int = MIN_ROWS):
        self.min_rows = min_rows
        spawn = multiprocessing.get_context("spawn")
        self._pool = ProcessPoolExecutor(
            max_workers=processes, mp_context=spawn, initializer=_outlive_no_broker, initargs=(os.getpid(),)
        )

    async def warm(self) -> None:
        """Start the workers now (a spawned interpreter takes a second or two to import the engine),
        not under the first heavy query."""
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._pool, _ready)

    def takes(self, rows: int) -> bool:
        return rows >= self.min_rows

    async def merge(
        self, merge: Merge, query: Query, partials: list[pa.Table], max_rows: int, one_node_merged: bool
    ) -> bytes:
        """`merge` (a module-level function, sent by name) run in a worker: the finalized answer's
        JSON; the merge's error (a limit crossed) is raised here."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(
            self._pool, _encoded, merge, query, partials, max_rows, one_node_merged
        )

    def shutdown(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
