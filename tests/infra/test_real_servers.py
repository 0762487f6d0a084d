"""Smoke tests proving the suite runs against a real ZooKeeper and a real memcached."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from pymemcache.client.base import Client

from strata.cli.local_servers import MemcachedServer, ZooKeeperServer

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
    from strata.cli.local_servers import free_port

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


def test_servers_die_with_a_parent_that_never_stopped_them(tmp_path: Path) -> None:
    """A test process killed mid-way must not leave ZooKeeper or memcached holding a port."""
    script = (
        "import os, sys\nfrom pathlib import Path\n"
        "from strata.cli.local_servers import MemcachedServer, ZooKeeperServer, free_port\n"
        "zk = ZooKeeperServer(port=free_port(), data_dir=Path(sys.argv[1])).start()\n"
        "mc = MemcachedServer(port=free_port()).start()\n"
        "print(zk.pid, mc.pid, flush=True)\nos._exit(0)\n"
    )
    done = subprocess.run([sys.executable, "-c", script, str(Path(tmp_path) / "zk")], capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    pids = [int(p) for p in done.stdout.split()]
    assert len(pids) == 2, done.stderr
    deadline = time.monotonic() + 10
    alive = pids
    while alive and time.monotonic() < deadline:
        alive = [p for p in pids if os.path.exists(f"/proc/{p}") and "zombie" not in _state(p)]
        time.sleep(0.2)
    for p in alive:  # only if the test is about to fail: ours to clean up
        os.kill(p, 9)
    assert not alive


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/status") as f:
            return next((line for line in f if line.startswith("State:")), "").lower()
    except OSError:
        return "zombie"
