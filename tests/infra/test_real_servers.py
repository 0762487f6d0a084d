"""Smoke tests proving the suite runs against a real ZooKeeper and a real memcached."""

from __future__ import annotations

import time
import uuid

import pytest
from kazoo.client import KazooClient
from pymemcache.client.base import Client

from strata.local_servers import MemcachedServer, ZooKeeperServer

pytestmark = pytest.mark.integration


def test_ephemeral_znode_vanishes_when_its_session_closes(zk_server: ZooKeeperServer) -> None:
    path = f"/smoke/{uuid.uuid4().hex}"
    owner = KazooClient(hosts=zk_server.address, timeout=5)
    watcher = KazooClient(hosts=zk_server.address, timeout=5)
    owner.start(timeout=10)
    watcher.start(timeout=10)
    try:
        owner.create(path, b"hello", ephemeral=True, makepath=True)
        data, stat = watcher.get(path)
        assert data == b"hello"
        assert stat.ephemeralOwner == owner.client_id[0]
        owner.stop()
        deadline = time.monotonic() + 10
        while watcher.exists(path) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert watcher.exists(path) is None
    finally:
        owner.stop()
        owner.close()
        watcher.stop()
        watcher.close()


def test_memcached_stores_and_reads_back(memcached_server: MemcachedServer) -> None:
    client = Client(("127.0.0.1", memcached_server.port), default_noreply=False, connect_timeout=2, timeout=2)
    try:
        key = f"smoke-{uuid.uuid4().hex}"
        value = bytes(range(256)) * 10
        assert client.set(key, value) is True
        assert client.get(key) == value
        assert client.get(key + "-absent") is None
    finally:
        client.close()


def test_memcached_server_can_be_stopped_and_restarted_on_the_same_port() -> None:
    from strata.local_servers import free_port

    server = MemcachedServer(port=free_port()).start()
    pid = server.pid
    server.stop()
    assert not server.serving()
    server.start()
    try:
        assert server.pid != pid
        assert server.serving()
    finally:
        server.stop()
