"""Large partials and answers cross between the broker and its merge workers as files in shared
memory (broker_service.merge_handoff): the same tables and bytes arrive, every file is removed once
read, and where a file cannot be written the pipe carries them as before."""

from __future__ import annotations

import asyncio
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from broker_service import merge_handoff as handoff
from broker_service.merge_processes import MergeProcesses
from strata.query import Query, parse_query

ROWS = handoff.HANDOFF_BYTES // 8 + 1000  # a partial past the threshold


def large_partial() -> pa.Table:
    rng = np.random.default_rng(7)
    lengths = rng.integers(0, 4, ROWS)
    offsets = np.concatenate(([0], np.cumsum(lengths))).astype(np.int32)
    lists = pa.ListArray.from_arrays(
        pa.array(offsets), pa.array(rng.integers(0, 100, int(offsets[-1]))), mask=pa.array(lengths == 3)
    )
    return pa.table({"nums": lists, "rows": pa.array(rng.integers(0, 9, ROWS), pa.int64())})


def oracle_answer(partials: list[pa.Table]) -> bytes:
    """Independent of the handoff: the partials' row counts and sums, as text."""
    return b"%d:%d" % (
        sum(t.num_rows for t in partials),
        sum(int(np.sum(t.column("rows"))) for t in partials),
    )


def summing_merge(query: Query, partials: list[pa.Table], max_rows: int, one_node_merged: bool) -> bytes:
    """A merge whose answer is larger than the threshold and says what the worker read."""
    return oracle_answer(partials).ljust(handoff.HANDOFF_BYTES + 1, b" ")


@pytest.fixture
def directory() -> Iterator[str]:
    made = handoff.handoff_directory()
    assert made is not None, "this host has no writable /dev/shm"
    yield made
    handoff.remove_directory(made)
    assert not Path(made).exists()


def test_a_large_answer_crosses_as_a_file_removed_once_read(directory: str) -> None:
    answer = os.urandom(handoff.HANDOFF_BYTES + 10)
    handed = handoff.answer_out(answer, directory)
    assert isinstance(handed, handoff.FileHandoff) and Path(handed.path).parent == Path(directory)
    assert handoff.answer_in(handed) == answer
    assert os.listdir(directory) == []


def test_a_large_partial_crosses_as_an_arrow_file_mapped_as_it_was(directory: str) -> None:
    table = large_partial()
    handed = handoff.partial_out(table, directory)
    assert isinstance(handed, handoff.FileHandoff)
    mapped = handoff.partial_in(handed)
    handoff.release([handed])
    assert os.listdir(directory) == []
    assert mapped.equals(table)  # still readable: the mapping outlives the file's name


def test_small_pieces_and_no_directory_take_the_pipe(directory: str) -> None:
    small = pa.table({"a": [1, 2, 3]})
    assert handoff.partial_out(small, directory) is small
    assert handoff.answer_out(b"[]", directory) == b"[]"
    big = large_partial()
    assert handoff.partial_out(big, None) is big
    assert handoff.answer_out(b"x" * (handoff.HANDOFF_BYTES + 1), None) == b"x" * (handoff.HANDOFF_BYTES + 1)
    assert os.listdir(directory) == []


def test_when_the_file_cannot_be_written_the_bytes_go_as_they_are(tmp_path: Path) -> None:
    gone = str(tmp_path / "removed")  # as a full tmpfs: writing fails with OSError
    answer = b"y" * (handoff.HANDOFF_BYTES + 1)
    assert handoff.answer_out(answer, gone) == answer
    table = large_partial()
    assert handoff.partial_out(table, gone) is table


def test_through_a_worker_process_the_answer_is_what_it_read_and_no_file_is_left() -> None:
    query = parse_query({"queryType": "timeseries", "dataSource": "w", "intervals": ["2015-09-12/2015-09-13"],
                         "granularity": "all", "aggregations": [{"type": "count", "name": "c"}]})  # fmt: skip
    partials = [large_partial(), pa.table({"nums": pa.array([[1]]), "rows": pa.array([5], pa.int64())})]

    async def scenario() -> tuple[bytes, str | None, list[str]]:
        processes = MergeProcesses(1)
        try:
            await processes.warm()
            answer = await processes.merge(summing_merge, query, partials, 10, False)
            where = processes._directory
            return answer, where, os.listdir(where) if where else []
        finally:
            processes.shutdown()

    answer, where, left = asyncio.run(asyncio.wait_for(scenario(), timeout=120))
    assert answer.rstrip() == oracle_answer(partials)
    assert where is not None and left == []
    assert not Path(where).exists()  # removed with the pool


def test_a_dead_brokers_directory_is_removed_and_a_live_ones_kept(tmp_path: Path) -> None:
    gone = subprocess.Popen(["true"])  # a process id that no longer runs
    gone.wait()
    dead = tmp_path / f"{handoff.PREFIX}{gone.pid}-abc"
    (dead / "answer-1").parent.mkdir()
    (dead / "answer-1").write_bytes(b"x" * 100)
    alive = tmp_path / f"{handoff.PREFIX}{os.getpid()}-def"
    alive.mkdir()
    unnamed = tmp_path / f"{handoff.PREFIX}xyz"  # an older name without a process id: left
    unnamed.mkdir()
    other = tmp_path / "something-else-1"
    other.mkdir()
    assert handoff.remove_orphans(tmp_path) == [str(dead)]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([alive.name, unnamed.name, other.name])


def test_the_brokers_own_directory_is_named_for_it(directory: str) -> None:
    assert Path(directory).name.startswith(f"{handoff.PREFIX}{os.getpid()}-")
