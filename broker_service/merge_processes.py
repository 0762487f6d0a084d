"""Large merges in worker processes, off the broker's interpreter.

Merging and finalizing a groupBy of 100,000 groups is a second and more of Python in one thread: in
the broker's process it holds the interpreter lock against the event loop and every other query,
so one heavy statement slows every cheap one. A merge of at least `min_rows` partial rows runs
instead in one of `--merge-processes` worker processes (started with `spawn`: the broker has
threads): the partials go there as Arrow, the answer comes back as its JSON bytes. Cheap merges
stay in the broker (a process hop would cost more than they do), and at most that many cores
merge heavy answers at once, whatever arrives. A query of negative context priority (Druid's low
lane) is merged on a thread of the worker at nice 10, as the data nodes run its scan: when the
host's cores are busy, the kernel serves everything else first. So its merges go there whatever
their size (past the few rows merged on the event loop). Large partials and answers cross as
files in shared memory, not through the pool's pipe (broker_service.merge_handoff).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor

import pyarrow as pa

from broker_service.merge_handoff import (
    HANDOFF_BYTES,
    FileHandoff,
    answer_in,
    answer_out,
    handoff_directory,
    partial_in,
    partial_out,
    release,
    remove_directory,
)
from strata.query import Query
from strata.server.priority_threads import run_for_priority
from strata.server.thread_priority import LOW_NICE, lower_own_priority

MIN_ROWS = 50_000  # partial rows from which a merge goes to a worker process
PARENT_POLL_S = 1.0
Merge = Callable[[Query, list[pa.Table], int, bool], bytes]  # the answer's JSON


def _encoded(
    merge: Merge,
    query: Query,
    pieces: list[pa.Table | FileHandoff],
    max_rows: int,
    one_node_merged: bool,
    directory: str | None = None,
) -> bytes | FileHandoff:
    """In the worker: the partials read (mapped from their files), merged, the answer written to
    one when large (`directory`); a low-priority query's all on a thread at a raised nice value."""

    def work() -> bytes | FileHandoff:
        partials = [partial_in(p) for p in pieces]
        return answer_out(merge(query, partials, max_rows, one_node_merged), directory)

    return work() if query.context.priority >= 0 else _at_low_priority(work)


def _at_low_priority(work: Callable[[], bytes | FileHandoff]) -> bytes | FileHandoff:
    """`work()` on a thread at a raised nice value (a thread may raise its own, never lower it
    back: so a thread of its own, ended with the work)."""
    answer: list[bytes | FileHandoff] = []
    failure: list[BaseException] = []

    def low() -> None:
        lower_own_priority(LOW_NICE)
        try:
            answer.append(work())
        except BaseException as e:  # raised again in the worker's own thread, to the broker
            failure.append(e)

    thread = threading.Thread(target=low, name="merge-low")
    thread.start()
    thread.join()
    if failure:
        raise failure[0]
    return answer[0]


def _outlive_no_broker(broker: int, directory: str | None) -> None:
    """In each worker: exit as soon as the broker is gone, however it went (kill -9 included); a
    worker waiting for work would otherwise stay, orphaned, holding its memory. The broker's
    handoff directory goes with it (a killed broker could not remove it)."""

    def watch() -> None:
        while os.getppid() == broker:
            time.sleep(PARENT_POLL_S)
        remove_directory(directory)
        os._exit(0)

    threading.Thread(target=watch, name="broker-watch", daemon=True).start()


def _ready() -> bool:
    import strata.query.all_types  # noqa: F401 - the query language every merge uses

    return True


class MergeProcesses:
    def __init__(self, processes: int, min_rows: int = MIN_ROWS):
        self.min_rows = min_rows
        self._directory = handoff_directory()  # None: everything through the pipe
        spawn = multiprocessing.get_context("spawn")
        self._pool = ProcessPoolExecutor(
            max_workers=processes,
            mp_context=spawn,
            initializer=_outlive_no_broker,
            initargs=(os.getpid(), self._directory),
        )

    async def warm(self) -> None:
        """Start the workers now (a spawned interpreter takes a second or two to import the engine),
        not under the first heavy query."""
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._pool, _ready)

    def takes(self, rows: int, priority: int = 0) -> bool:
        """Whether a merge of `rows` partial rows (more than the broker merges inline) goes to a
        worker: a large one, and a low-priority query's whatever its size - there its Python work
        runs at nice 10 under an interpreter lock of its own; in the broker's process a thread at
        nice 10 that the kernel takes off a busy core while it holds the lock stalls the event loop."""
        return rows >= self.min_rows or priority < 0

    async def merge(
        self, merge: Merge, query: Query, partials: list[pa.Table], max_rows: int, one_node_merged: bool
    ) -> bytes:
        """`merge` (a module-level function, sent by name) run in a worker: the finalized answer's
        JSON; the merge's error (a limit crossed) is raised here."""
        pieces: list[pa.Table | FileHandoff] = list(partials)
        if self._directory is not None and any(t.nbytes >= HANDOFF_BYTES for t in partials):
            written = lambda: [partial_out(t, self._directory) for t in partials]  # noqa: E731
            pieces = await run_for_priority(query.context.priority, written)
        try:
            future = self._pool.submit(
                _encoded, merge, query, pieces, max_rows, one_node_merged, self._directory
            )
            try:
                answer = await asyncio.wrap_future(future)
            except asyncio.CancelledError:  # the worker goes on: its answer's file is removed when done
                future.add_done_callback(_discard_answer)
                raise
        finally:
            release(pieces)
        if isinstance(answer, bytes):
            return answer
        return await run_for_priority(query.context.priority, answer_in, answer)

    def shutdown(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        remove_directory(self._directory)


def _discard_answer(future: Future[bytes | FileHandoff]) -> None:
    """A cancelled query's answer, once its worker is done: its file removed unread."""
    if not future.cancelled() and future.exception() is None:
        release([future.result()])
