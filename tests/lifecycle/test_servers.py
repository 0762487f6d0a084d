"""`strata historical` and `strata broker` as real processes: SIGTERM and SIGINT stop them cleanly.

Clean means: exit code 0, the port free again, the ZooKeeper announcement gone -- also when the
process was started with SIGINT ignored (what a non-interactive shell does to a background job).
"""

from __future__ import annotations

import signal
import socket
from pathlib import Path

import httpx
import pytest

from harness.processes import StrataProcess
from strata.discovery import ZkPaths
from tests.historical.segment_factory import HistoricalCluster, kazoo, served_ids, unique_base, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

CASES = [
    pytest.param(signal.SIGTERM, False, id="SIGTERM"),
    pytest.param(signal.SIGINT, False, id="SIGINT"),
    pytest.param(signal.SIGINT, True, id="SIGINT-inherited-ignored"),
]


def port_free(port: int) -> bool:
    """Bindable as a server binds it (SO_REUSEADDR: connections left in TIME_WAIT do not count)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def stop_with(process: StrataProcess, sig: signal.Signals) -> int:
    assert process.proc is not None
    process.proc.send_signal(sig)
    return process.proc.wait(40)


@pytest.mark.parametrize(("sig", "ignored"), CASES)
def test_historical_stops_cleanly(tmp_path: Path, zk_hosts: str, sig: signal.Signals, ignored: bool) -> None:
    cluster = HistoricalCluster(tmp_path, zk_hosts=zk_hosts, zk_base=unique_base("lifecycle"))
    segments = cluster.add_segments("wiki", [0])
    node = cluster.historical("h1", extra=["--drain-seconds", "5"])
    node.ignore_sigint = ignored
    paths = ZkPaths(cluster.zk_base)
    try:
        node.start().wait_http("/status/ready", timeout=60)
        with kazoo(zk_hosts) as zk:
            assert zk.exists(paths.announcement(node.address))
            wait_until(lambda: served_ids(zk, paths).get(node.address) == [segments[0].id], 30, "the segment")
            assert stop_with(node, sig) == 0, node.log_text()[-3000:]
            assert port_free(node.port)
            wait_until(
                lambda: not zk.exists(paths.announcement(node.address)), 5, "the announcement to vanish"
            )
            assert served_ids(zk, paths).get(node.address, []) == []  # the batches are ephemeral
    finally:
        cluster.stop_all()


@pytest.mark.parametrize(("sig", "ignored"), CASES)
def test_broker_stops_cleanly(tmp_path: Path, zk_hosts: str, sig: signal.Signals, ignored: bool) -> None:
    broker = StrataProcess("broker", ["--zk", zk_hosts, "--drain-seconds", "5"], tmp_path / "broker.log")
    broker.ignore_sigint = ignored
    try:
        broker.start()
        assert httpx.get(broker.url + "/druid/v2/datasources", timeout=10).status_code == 200
        assert stop_with(broker, sig) == 0, broker.log_text()[-3000:]
        assert port_free(broker.port)
    finally:
        broker.stop()
