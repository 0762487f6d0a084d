"""The change history behind `/druid-internal/v1/segments`, driven like Druid's syncer does."""

from __future__ import annotations

import asyncio

from strata.data_node.change_feed import ChangeHistory
from strata.discovery import ChangeCounter
from timeline import DataSegment, Interval


def seg(i: int) -> DataSegment:
    return DataSegment("ds", Interval(i * 1000, (i + 1) * 1000), "v1")


def actions(snapshot: object) -> list[tuple[str, str]]:
    assert snapshot is not None
    return [(r.action, r.segment.id) for r in snapshot.requests if r.segment is not None]  # type: ignore[attr-defined]


def test_snapshot_then_deltas_and_resets() -> None:
    async def scenario() -> None:
        history = ChangeHistory(max_changes=5)
        await history.announce([seg(1), seg(2)])
        full = history.since(None)
        assert full is not None and actions(full) == [("load", seg(1).id), ("load", seg(2).id)]
        assert full.counter == history.last and full.counter.counter == 2
        assert history.since(full.counter) is None  # nothing new
        await history.unannounce([seg(1)])
        await history.announce([seg(3), seg(2)])  # seg(2) already announced: no change
        delta = history.since(full.counter)
        assert actions(delta) == [("drop", seg(1).id), ("load", seg(3).id)]
        assert delta is not None and delta.counter is not None and delta.counter.counter == 4
        bad_hash = history.since(ChangeCounter(full.counter.counter, full.counter.hash + 1))
        assert bad_hash is not None and bad_hash.reset_counter
        future = history.since(ChangeCounter(99, 0))
        assert future is not None and future.reset_counter
        for i in range(10, 16):
            await history.announce([seg(i)])
        too_old = history.since(full.counter)
        assert too_old is not None and too_old.reset_counter and "older" in (too_old.reset_cause or "")
        again = history.since(None)
        assert again is not None and {sid for _, sid in actions(again)} == {
            s.id for s in [seg(2), seg(3), *(seg(i) for i in range(10, 16))]
        }

    asyncio.run(scenario())


def test_long_poll_wakes_on_change_and_times_out() -> None:
    async def scenario() -> None:
        history = ChangeHistory()
        await history.announce([seg(1)])
        position = history.last
        assert await history.wait_since(position, 0.05) is None
        waiter = asyncio.create_task(history.wait_since(position, 30))
        await asyncio.sleep(0.05)
        assert not waiter.done()
        await history.announce([seg(2)])
        answer = await asyncio.wait_for(waiter, 5)
        assert actions(answer) == [("load", seg(2).id)]

    asyncio.run(scenario())


def test_close_answers_waiting_and_later_polls_at_once() -> None:
    """A stopping server's feed must not hold its drain for a broker's 30 s poll."""

    async def scenario() -> None:
        history = ChangeHistory()
        await history.announce([seg(1)])
        position = history.last
        waiter = asyncio.create_task(history.wait_since(position, 30))
        await asyncio.sleep(0.05)
        history.close()
        assert await asyncio.wait_for(waiter, 1) is None  # nothing changed: 204
        assert await asyncio.wait_for(history.wait_since(position, 30), 1) is None
        full = await asyncio.wait_for(history.wait_since(None, 30), 1)
        assert full is not None and actions(full) == [("load", seg(1).id)]

    asyncio.run(scenario())
