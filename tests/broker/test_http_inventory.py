"""The HTTP change-feed follower against a real (in-test) change-feed server."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from broker_service.inventory.http_inventory import HttpInventory, parse_node
from broker_service.server_view import BrokerServerView
from strata.cli.local_servers import free_port
from strata.discovery.server_metadata import ServerMetadata, ServerType
from tests.broker.feed_server import FeedState, feed_app
from tests.broker.helpers import run, segment, serve


async def until(predicate: Callable[[], bool], within: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.02)


def days(n: int) -> list:
    return [segment(interval=f"2015-09-{d:02d}/2015-09-{d + 1:02d}") for d in range(1, n + 1)]


def test_full_sync_then_deltas_then_reset():
    state = FeedState()
    a, b, c = days(3)
    state.load(a)
    state.load(b)
    with serve(feed_app(state)) as port:

        async def main() -> None:
            view = BrokerServerView()
            node = ServerMetadata(f"127.0.0.1:{port}", f"127.0.0.1:{port}")
            inv = HttpInventory(view, [node], server_timeout_ms=300)
            await inv.start()
            try:
                await until(lambda: set(view.segments_of(node.name)) == {a.id, b.id})
                assert inv.status().initialized and inv.status().connected
                state.load(c)
                state.drop(a)
                await until(lambda: set(view.segments_of(node.name)) == {b.id, c.id})
                # deltas were asked with the last counter and hash, not as full syncs
                assert any(r.get("counter") not in (None, "-1") and "hash" in r for r in state.requests)
                # the node forgets its history: the broker gets a reset and re-syncs fully
                state.new_epoch()
                state.drop(b)
                full_before = sum(r.get("counter") == "-1" for r in state.requests)
                await until(lambda: set(view.segments_of(node.name)) == {c.id})
                assert sum(r.get("counter") == "-1" for r in state.requests) > full_before
            finally:
                await inv.stop()

        run(main())


def test_node_down_marks_it_down_and_backoff_then_full_sync_on_return():
    state = FeedState()
    a, b = days(2)
    state.load(a)
    port = free_port()
    node = ServerMetadata(f"127.0.0.1:{port}", f"127.0.0.1:{port}")

    async def main() -> None:
        view = BrokerServerView()
        inv = HttpInventory(view, [node], server_timeout_ms=200, initial_backoff_s=0.05, max_backoff_s=0.2)
        await inv.start()
        try:
            # nothing listens yet: the node is down, failures accumulate, the view stays empty
            await until(lambda: inv.status().nodes[node.name]["failures"] >= 2)
            assert not inv.status().nodes[node.name]["up"]
            assert view.segment_count == 0
            assert inv.status().initialized  # attempted: readiness does not wait forever

            with serve(feed_app(state), port):
                await until(lambda: set(view.segments_of(node.name)) == {a.id})
                assert inv.status().nodes[node.name]["up"]
            # server gone again: node down, its segments leave the view
            state.load(b)
            await until(lambda: not inv.status().nodes[node.name]["up"])
            assert view.segment_count == 0
            assert inv.status().outages >= 1
            with serve(feed_app(state), port):
                await until(lambda: set(view.segments_of(node.name)) == {a.id, b.id})
        finally:
            await inv.stop()

    run(main())


def test_parse_node():
    assert parse_node("127.0.0.1:8083") == ServerMetadata(
        "127.0.0.1:8083", "127.0.0.1:8083", ServerType.HISTORICAL
    )
    assert parse_node("h:8100/realtime").type == "realtime"
    with pytest.raises(ValueError):
        parse_node("nohost")
