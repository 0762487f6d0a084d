"""Merges in worker processes (broker_service.merge_processes): a low-priority query's merge runs at
nice 10 in the worker, as the data nodes run its scan; any other at the worker's own; failures pass
on to the broker."""

from __future__ import annotations

import asyncio
import os
import sys
import threading
from typing import Any

import pyarrow as pa
import pytest

from broker_service.merge_processes import MergeProcesses, _encoded
from strata.query import Query, parse_query
from strata.query.errors import ResourceLimitExceeded
from strata.server.thread_priority import LOW_NICE

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="per-thread nice values are Linux's")


def count_query(**context: Any) -> Query:
    return parse_query({"queryType": "timeseries", "dataSource": "w", "intervals": ["2015-09-12/2015-09-13"],
                        "granularity": "all", "aggregations": [{"type": "count", "name": "c"}],
                        "context": context})  # fmt: skip


def nice_of_merge(query: Query, partials: list[pa.Table], max_rows: int, one_node_merged: bool) -> bytes:
    """A merge that answers the nice value of the thread it ran on."""
    if max_rows < 0:
        raise ResourceLimitExceeded("over the limit")
    return str(os.getpriority(os.PRIO_PROCESS, threading.get_native_id())).encode()


def test_a_low_priority_merge_runs_at_nice_10_and_others_at_the_workers_own() -> None:
    own = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    assert own < LOW_NICE
    assert _encoded(nice_of_merge, count_query(priority=-1), [], 10, False) == str(LOW_NICE).encode()
    assert _encoded(nice_of_merge, count_query(), [], 10, False) == str(own).encode()
    assert _encoded(nice_of_merge, count_query(priority=5), [], 10, False) == str(own).encode()
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == own  # the caller's unchanged
    with pytest.raises(ResourceLimitExceeded):
        _encoded(nice_of_merge, count_query(priority=-1), [], -1, False)


def test_in_a_worker_process_too() -> None:
    async def scenario() -> tuple[bytes, bytes]:
        processes = MergeProcesses(1)
        try:
            await processes.warm()
            low = await processes.merge(nice_of_merge, count_query(priority=-3), [], 10, False)
            normal = await processes.merge(nice_of_merge, count_query(), [], 10, False)
            with pytest.raises(ResourceLimitExceeded):
                await processes.merge(nice_of_merge, count_query(priority=-3), [], -1, False)
            return low, normal
        finally:
            processes.shutdown()

    low, normal = asyncio.run(asyncio.wait_for(scenario(), timeout=120))
    assert int(low) == LOW_NICE and int(normal) < LOW_NICE


def test_a_low_priority_merges_partials_are_read_and_its_answer_written_at_nice_10_too(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from broker_service.merge_handoff import answer_out as written
    from broker_service.merge_handoff import partial_in as read

    seen: list[tuple[str, int]] = []

    def reading(piece: Any) -> pa.Table:
        seen.append(("read", os.getpriority(os.PRIO_PROCESS, threading.get_native_id())))
        return read(piece)

    def writing(answer: bytes, directory: str | None) -> Any:
        seen.append(("written", os.getpriority(os.PRIO_PROCESS, threading.get_native_id())))
        return written(answer, directory)

    monkeypatch.setattr("broker_service.merge_processes.partial_in", reading)
    monkeypatch.setattr("broker_service.merge_processes.answer_out", writing)
    own = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    partial = pa.table({"c": [1, 2]})
    assert _encoded(nice_of_merge, count_query(priority=-1), [partial], 10, False) == str(LOW_NICE).encode()
    assert seen == [("read", LOW_NICE), ("written", LOW_NICE)]
    seen.clear()
    assert _encoded(nice_of_merge, count_query(), [partial], 10, False) == str(own).encode()
    assert seen == [("read", own), ("written", own)]


def test_a_low_priority_querys_merges_go_to_a_worker_whatever_their_size() -> None:
    processes = MergeProcesses(1, min_rows=50_000)
    try:
        assert processes.takes(50_000) and processes.takes(50_000, priority=-1)
        assert not processes.takes(3_000) and not processes.takes(3_000, priority=0)
        assert processes.takes(3_000, priority=-1)
    finally:
        processes.shutdown()
