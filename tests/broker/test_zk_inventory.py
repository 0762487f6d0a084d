"""ZkInventory against a real ZooKeeper: announcements and batch znodes written as Druid lays them out."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable

import pytest
from kazoo.client import KazooClient

from broker_service.inventory.zk_inventory import ZkInventory
from broker_service.server_view import BrokerServerView
from strata.cli.local_servers import ZooKeeperServer, free_port
from strata.discovery import ServerMetadata, ServerType, ZkPaths, encode_batch, encode_segment
from tests.broker.helpers import run, segment

pytestmark = pytest.mark.integration

SEGS = [segment(interval=f"2015-09-{d:02d}/2015-09-{d + 1:02d}") for d in range(1, 7)]


async def until(predicate: Callable[[], bool], within: float = 15.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.02)


class Announcer:
    """Writes znodes the way a Druid data server does (test side, its own session)."""

    def __init__(self, hosts: str, paths: ZkPaths):
        self.zk = KazooClient(hosts=hosts, timeout=5)
        self.zk.start(timeout=20)
        self.paths = paths

    def announce(self, name: str, type_: ServerType = ServerType.HISTORICAL) -> None:
        meta = ServerMetadata(name=name, host=name, type=type_)
        self.zk.create(self.paths.announcement(name), meta.to_bytes(), ephemeral=True, makepath=True)

    def unannounce(self, name: str) -> None:
        self.zk.delete(self.paths.announcement(name))

    def batch(self, server: str, batch: str, segments) -> None:
        path = self.paths.batch(server, batch)
        data = encode_batch(encode_segment(s) for s in segments)
        if self.zk.exists(path):
            self.zk.set(path, data)
        else:
            self.zk.create(path, data, ephemeral=True, makepath=True)

    def delete_batch(self, server: str, batch: str) -> None:
        self.zk.delete(self.paths.batch(server, batch))

    def close(self) -> None:
        self.zk.stop()
        self.zk.close()


def ids(view: BrokerServerView, server: str) -> set[str]:
    return set(view.segments_of(server))


def test_announcements_and_batches_feed_the_view(zk_hosts):
    base = f"/t-{uuid.uuid4().hex[:8]}/druid"
    paths = ZkPaths(base)
    ann = Announcer(zk_hosts, paths)
    a, b, c, d = SEGS[:4]

    async def main() -> None:
        view = BrokerServerView()
        inv = ZkInventory(view, zk_hosts, base_path=base)
        await inv.start()
        try:
            await until(lambda: inv.status().initialized and inv.status().connected)
            ann.announce("h1:8083")
            ann.batch("h1:8083", "b1", [a, b])
            await until(lambda: ids(view, "h1:8083") == {a.id, b.id})
            ann.batch("h1:8083", "b1", [b, c])  # rewrite: a dropped, c added
            await until(lambda: ids(view, "h1:8083") == {b.id, c.id})
            ann.batch("h1:8083", "b2", [c, d])  # c now in two batches
            await until(lambda: ids(view, "h1:8083") == {b.id, c.id, d.id})
            ann.batch("h1:8083", "b1", [b])  # c leaves b1 but is still in b2: stays
            await asyncio.sleep(0.3)
            assert ids(view, "h1:8083") == {b.id, c.id, d.id}
            ann.delete_batch("h1:8083", "b2")
            await until(lambda: ids(view, "h1:8083") == {b.id})
            # a realtime server announcing the same segment: historical preferred
            ann.announce("rt:8100", ServerType.REALTIME)
            ann.batch("rt:8100", "r1", [b])
            await until(lambda: ids(view, "rt:8100") == {b.id})
            assert view.selector(b.id).pick().name == "h1:8083"
            ann.unannounce("h1:8083")
            await until(lambda: view.server("h1:8083") is None)
            assert view.selector(b.id).pick().name == "rt:8100"
            assert view.server("rt:8100").type == "realtime"
        finally:
            await inv.stop()

    try:
        run(main())
    finally:
        ann.close()


def test_malformed_znodes_are_skipped_not_fatal(zk_hosts):
    base = f"/t-{uuid.uuid4().hex[:8]}/druid"
    paths = ZkPaths(base)
    ann = Announcer(zk_hosts, paths)
    a = SEGS[0]

    async def main() -> None:
        view = BrokerServerView()
        inv = ZkInventory(view, zk_hosts, base_path=base)
        await inv.start()
        try:
            ann.zk.create(paths.announcement("bad:1"), b"{not json", ephemeral=True, makepath=True)
            ann.announce("h1:8083")
            ann.zk.create(paths.batch("h1:8083", "junk"), b'[{"nope":1}]', ephemeral=True, makepath=True)
            ann.zk.create(paths.batch("h1:8083", "junk2"), b"not json", ephemeral=True, makepath=True)
            ann.batch("h1:8083", "b1", [a])
            await until(lambda: ids(view, "h1:8083") == {a.id})
            assert view.server("bad:1") is None
        finally:
            await inv.stop()

    try:
        run(main())
    finally:
        ann.close()


def test_new_session_rereads_everything(zk_hosts):
    base = f"/t-{uuid.uuid4().hex[:8]}/druid"
    paths = ZkPaths(base)
    ann = Announcer(zk_hosts, paths)
    a, b, c = SEGS[:3]

    async def main() -> None:
        view = BrokerServerView()
        inv = ZkInventory(view, zk_hosts, base_path=base, session_timeout_s=4)
        await inv.start()
        try:
            ann.announce("h1:8083")
            ann.batch("h1:8083", "b1", [a, b])
            await until(lambda: ids(view, "h1:8083") == {a.id, b.id})
            # expire the broker's session the classic way: another client takes it over and closes
            session_id, password = inv._zk.client_id
            thief = KazooClient(hosts=zk_hosts, client_id=(session_id, password))
            await asyncio.to_thread(thief.start, 20)
            await asyncio.to_thread(thief.stop)
            thief.close()
            # while it was away the world changed
            ann.batch("h1:8083", "b1", [b, c])
            await until(lambda: inv.status().outages >= 1)
            await until(lambda: ids(view, "h1:8083") == {b.id, c.id} and inv.status().connected)
        finally:
            await inv.stop()

    try:
        run(main())
    finally:
        ann.close()


def test_zookeeper_outage_keeps_last_view(tmp_path):
    if not ZooKeeperServer.available():
        pytest.skip("ZooKeeper not installed")
    zk = ZooKeeperServer(port=free_port(), data_dir=tmp_path / "zk").start()
    paths = ZkPaths("/druid")
    ann = Announcer(zk.address, paths)
    a, b = SEGS[:2]

    async def main() -> None:
        view = BrokerServerView()
        inv = ZkInventory(view, zk.address, session_timeout_s=30)
        await inv.start()
        try:
            ann.announce("h1:8083")
            ann.batch("h1:8083", "b1", [a, b])
            await until(lambda: ids(view, "h1:8083") == {a.id, b.id})
            await asyncio.to_thread(zk.stop)
            await until(lambda: not inv.status().connected)
            assert inv.status().last_error and inv.status().outages == 1
            await asyncio.sleep(0.5)
            assert ids(view, "h1:8083") == {a.id, b.id}  # the last view keeps serving
            await asyncio.to_thread(zk.start)
            await until(lambda: inv.status().connected, within=30)
            assert ids(view, "h1:8083") == {a.id, b.id}
        finally:
            await inv.stop()

    try:
        run(main())
    finally:
        ann.close()
        zk.stop()
