"""A task's batches made ahead in a thread: same items in the same order, errors raised in the task,
a bounded lead, and an early stop that closes the source (end to end in test_segment_files.py)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from strata.spark.broker_client import StrataError
from strata.spark.read_ahead import read_ahead


class Source:
    """Numbered items, counting how many were made and whether the generator was closed."""

    def __init__(self, count: int, fail_at: int | None = None) -> None:
        self.count = count
        self.fail_at = fail_at
        self.made = 0
        self.closed = threading.Event()
        self.thread: str | None = None

    def items(self) -> Iterator[int]:
        try:
            for i in range(self.count):
                self.thread = threading.current_thread().name
                if i == self.fail_at:
                    raise StrataError(f"cannot read segment file number {i}")
                self.made += 1
                yield i
        finally:
            self.closed.set()


def wait_for(condition: object, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_every_item_in_order_made_in_another_thread() -> None:
    source = Source(1000)
    assert list(read_ahead(source.items(), depth=3)) == list(range(1000))
    assert source.thread is not None and source.thread != threading.current_thread().name
    assert source.closed.is_set()
    assert list(read_ahead(Source(0).items())) == []


def test_an_error_is_raised_in_the_task_after_the_items_before_it() -> None:
    got: list[int] = []
    with pytest.raises(StrataError, match="segment file number 5"):
        for item in read_ahead(Source(10, fail_at=5).items()):
            got.append(item)
    assert got == [0, 1, 2, 3, 4]


def test_the_lead_is_bounded_and_an_early_stop_closes_the_source() -> None:
    source = Source(1_000_000)
    reader = read_ahead(source.items(), depth=2)
    assert next(reader) == 0
    wait_for(lambda: source.made >= 4)
    time.sleep(0.3)  # the producer now waits on the full queue
    assert source.made <= 1 + 2 + 1  # the one handed out, `depth` waiting, one blocked in put
    reader.close()  # Spark stops reading (a LIMIT, a cancelled task)
    wait_for(source.closed.is_set)
    assert not any(t.name == "strata-read-ahead" and t.is_alive() for t in threading.enumerate())
