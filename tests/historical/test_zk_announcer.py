"""ZkAnnouncer against a real ZooKeeper: Druid's layout, batch rewrites, session expiry."""

from __future__ import annotations

import asyncio

import orjson
import pytest
from kazoo.client import KazooClient

from strata.data_node.announcer import ZkAnnouncer
from strata.discovery import BatchLimits, ServerMetadata, ZkPaths
from tests.historical.segment_factory import kazoo, served_ids, unique_base, wait_until
from timeline import DataSegment, Interval

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]

SERVER = ServerMetadata("127.0.0.1:18083", "127.0.0.1:18083", tier="hot", max_size=10**9)


def segs(n: int) -> list[DataSegment]:
    day = 86_400_000
    return [DataSegment("wiki", Interval(i * day, (i + 1) * day), "v1", size=i) for i in range(n)]


def test_layout_rewrites_and_expiry(zk_hosts: str) -> None:
    paths = ZkPaths(unique_base("announcer"))
    mine = f"{paths.segments}/{SERVER.name}"

    async def scenario(zk: KazooClient) -> None:
        announcer = ZkAnnouncer(zk_hosts, paths, SERVER, limits=BatchLimits(segments_per_node=4))
        await announcer.start()
        try:
            data, stat = zk.get(paths.announcement(SERVER.name))
            assert orjson.loads(data) == SERVER.to_json() and stat.ephemeralOwner == announcer.session_id
            segments = segs(10)
            await announcer.announce(segments)
            batches = zk.get_children(mine)
            assert len(batches) == 3  # 4 + 4 + 2
            arrays = [orjson.loads(zk.get(f"{mine}/{b}")[0]) for b in batches]
            assert sorted(len(a) for a in arrays) == [2, 4, 4]
            assert sorted((x for a in arrays for x in a), key=lambda x: x["identifier"]) == sorted(
                (s.to_json() for s in segments), key=lambda x: x["identifier"]
            )
            for b in batches:
                assert zk.exists(f"{mine}/{b}").ephemeralOwner == announcer.session_id
                assert b.startswith(f"{SERVER.name}_historical_hot_")

            await announcer.unannounce(segments[:6])
            assert sorted(served_ids(zk, paths)[SERVER.name]) == sorted(s.id for s in segments[6:])

            # force a session expiry: another client takes over the session id and closes it
            old_session = announcer.session_id
            assert announcer.zk.client_id is not None
            thief = KazooClient(hosts=zk_hosts, client_id=announcer.zk.client_id)
            thief.start(timeout=20)
            thief.stop()
            thief.close()

            def back() -> bool:
                stat = zk.exists(paths.announcement(SERVER.name))
                return stat is not None and stat.ephemeralOwner not in (0, old_session)

            await asyncio.to_thread(wait_until, back, 30, "re-announcement after expiry")
            await asyncio.to_thread(
                wait_until,
                lambda: (
                    sorted(served_ids(zk, paths).get(SERVER.name, [])) == sorted(s.id for s in segments[6:])
                ),
                30,
                "segments re-announced",
            )
            assert announcer.resyncs >= 1
            await announcer.announce(segs(12)[10:])  # still works with the new session
            assert len(served_ids(zk, paths)[SERVER.name]) == 6
        finally:
            await announcer.stop()
        # a clean close removes every ephemeral at once
        assert zk.exists(paths.announcement(SERVER.name)) is None
        assert zk.get_children(mine) == []

    with kazoo(zk_hosts) as zk:
        asyncio.run(scenario(zk))


def test_stale_znodes_of_an_earlier_process_are_replaced(zk_hosts: str) -> None:
    paths = ZkPaths(unique_base("stale"))

    async def scenario(zk: KazooClient) -> None:
        first = ZkAnnouncer(zk_hosts, paths, SERVER)
        await first.start()
        await first.announce(segs(3))
        # a second process with the same name starts while the first session is still alive
        second = ZkAnnouncer(zk_hosts, paths, SERVER)
        await second.start()
        try:
            await second.announce(segs(2))
            assert sorted(served_ids(zk, paths)[SERVER.name]) == sorted(s.id for s in segs(2))
            assert zk.exists(paths.announcement(SERVER.name)).ephemeralOwner == second.session_id
        finally:
            await second.stop()
            await first.stop()

    with kazoo(zk_hosts) as zk:
        asyncio.run(scenario(zk))
