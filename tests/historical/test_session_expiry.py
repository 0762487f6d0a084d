"""A running `strata historical` whose ZooKeeper session expires announces everything again.

The session is expired for real by freezing the process (SIGSTOP) past its session timeout: the
ZooKeeper server sees no heartbeat, expires the session and deletes its ephemeral znodes. On SIGCONT
the client reconnects, is told the session is gone, and the node must announce again on a new
session. (Stopping the ZooKeeper server instead does not reliably expire anything: a restarted
server restores the sessions it had with a fresh timeout.)
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from kazoo.client import KazooClient

from harness.processes import StrataProcess
from strata.cli.local_servers import ZooKeeperServer, free_port
from strata.discovery import ZkPaths
from tests.historical.segment_factory import HistoricalCluster, as_published, kazoo, unique_base, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

ROWS_PER_SEGMENT = 20  # build_segment's default
SESSION_TIMEOUT_S = 10.0  # the historical's ZooKeeper session timeout (HistoricalConfig default)


def announced(zk: KazooClient, paths: ZkPaths, server: str) -> tuple[Any, int, dict[str, Any]] | None:
    """(announcement JSON, its session owner, segment id -> descriptor over all batches) or None."""
    node = paths.announcement(server)
    folder = paths.server_segments(server)
    if not zk.exists(node) or not zk.exists(folder):
        return None
    data, stat = zk.get(node)
    segments: dict[str, Any] = {}
    for batch in zk.get_children(folder):
        try:
            raw, batch_stat = zk.get(f"{folder}/{batch}")
        except Exception:  # rewritten between listing and reading
            return None
        if batch_stat.ephemeralOwner != stat.ephemeralOwner:
            return None  # a batch of the old session not yet removed
        segments.update({item["identifier"]: as_published(item) for item in orjson.loads(raw)})
    return orjson.loads(data), stat.ephemeralOwner, segments


@pytest.fixture
def frozen_safe() -> Iterator[list[StrataProcess]]:
    """Processes this test may SIGSTOP: always resumed before they are stopped."""
    stopped: list[StrataProcess] = []
    yield stopped
    for p in stopped:
        if p.alive():
            os.kill(p.pid, signal.SIGCONT)


def test_session_expiry_announces_everything_again(
    zk_hosts: str, tmp_path: Path, frozen_safe: list[StrataProcess]
) -> None:
    cluster = HistoricalCluster(tmp_path, zk_hosts, unique_base("expiry"))
    paths = ZkPaths(cluster.zk_base)
    segments = cluster.add_segments("wiki", range(7))
    wanted = {s.id: s.to_json() for s in segments}
    try:
        node = cluster.historical("h1", replicas=1).start()
        with kazoo(zk_hosts) as zk:
            wait_until(lambda: (a := announced(zk, paths, node.address)) is not None and set(a[2]) == set(wanted),
                       60, "first announcement")  # fmt: skip
            before = announced(zk, paths, node.address)
            assert before is not None
            meta, session, served = before
            assert served == wanted and meta["host"] == node.address and session != 0

            frozen_safe.append(node)
            os.kill(node.pid, signal.SIGSTOP)
            try:  # the server expires the frozen session and drops every ephemeral znode of it
                wait_until(
                    lambda: not zk.exists(paths.announcement(node.address)), 60, "session expiry", 0.25
                )
                assert zk.get_children(paths.server_segments(node.address)) == []
            finally:
                os.kill(node.pid, signal.SIGCONT)

            wait_until(lambda: (a := announced(zk, paths, node.address)) is not None and set(a[2]) == set(wanted),
                       60, "announcement after expiry")  # fmt: skip
            after = announced(zk, paths, node.address)
            assert after is not None
            assert after[0] == meta and after[2] == wanted  # the same server, the same segments
            assert after[1] not in (0, session)  # on a new session
        assert node.alive()
        query = {"queryType": "timeseries", "dataSource": "wiki", "intervals": ["2015-09-01/2015-10-01"],
                 "granularity": "all", "aggregations": [{"type": "longSum", "name": "rows", "fieldName": "count"},
                                                        {"type": "count", "name": "n"}]}  # fmt: skip
        resp = httpx.post(f"{node.url}/druid/v2/", json=query, timeout=30)
        assert resp.status_code == 200, resp.text
        total = ROWS_PER_SEGMENT * len(segments)
        assert [r["result"] for r in resp.json()] == [{"rows": total, "n": total}]
        node.wait_http("/status/ready", timeout=30)
    finally:
        cluster.stop_all()


@pytest.mark.skipif(not ZooKeeperServer.available(), reason="ZooKeeper is not installed")
def test_zookeeper_restart_past_the_session_timeout_leaves_everything_announced(tmp_path: Path) -> None:
    """A ZooKeeper outage longer than the session timeout, then the same server back on the same port and
    data: whether the server restored the session or expired it, the node ends up fully announced."""
    zk_server = ZooKeeperServer(port=free_port(), data_dir=tmp_path / "zk").start()
    cluster = HistoricalCluster(tmp_path, zk_server.address, unique_base("zk-restart"))
    paths = ZkPaths(cluster.zk_base)
    segments = cluster.add_segments("wiki", range(5))
    wanted = {s.id: s.to_json() for s in segments}
    try:
        node = cluster.historical("h1", replicas=1).start()
        with kazoo(zk_server.address) as zk:
            wait_until(lambda: (a := announced(zk, paths, node.address)) is not None and set(a[2]) == set(wanted),
                       60, "first announcement")  # fmt: skip
            before = announced(zk, paths, node.address)
        assert before is not None
        zk_server.stop()
        time.sleep(SESSION_TIMEOUT_S + 2)  # the outage outlasts the node's session timeout
        assert node.alive()
        zk_server.start()
        with kazoo(zk_server.address) as zk:
            wait_until(lambda: (a := announced(zk, paths, node.address)) is not None and set(a[2]) == set(wanted),
                       60, "announcement after the outage")  # fmt: skip
            after = announced(zk, paths, node.address)
        assert after is not None and after[0] == before[0] and after[2] == wanted
        node.wait_http("/status/ready", timeout=30)
    finally:
        cluster.stop_all()
        zk_server.stop()
