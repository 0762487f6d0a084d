"""Real processes: a node binds one address and announces another, a broker finds it under the
announced name and queries it; a loopback announcement into a ZooKeeper on another host is
refused before the node starts (nothing is sent: the refusal comes first)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import orjson
import pytest

from harness.processes import StrataProcess, running
from strata.cli.local_servers import free_port
from strata.discovery import ZkPaths
from tests.historical.segment_factory import HistoricalCluster, kazoo, served_ids, unique_base, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

# a documentation-range address (TEST-NET-3): never contacted, the node refuses before connecting
REMOTE_ZK = "203.0.113.9:2181"


@pytest.mark.parametrize("command", ["historical", "realtime"])
def test_loopback_announcement_to_a_remote_zookeeper_is_refused_at_start(
    command: str, tmp_path: Path
) -> None:
    spec = tmp_path / "spec.json"
    spec.write_text(
        '{"dataSource": "x", "timestampSpec": {"column": "t"}, "dimensionsSpec": {"dimensions": []}}'
    )
    argv = [sys.executable, "-m", "strata.cli.main", command, "--port", str(free_port()), "--zk", REMOTE_ZK,
            "--deep-storage", str(tmp_path / "deep"), "--metadata", str(tmp_path / "m.db"),
            "--segment-cache" if command == "historical" else "--base-dir", str(tmp_path / "var")]  # fmt: skip
    if command == "realtime":
        argv += ["--spec", str(spec)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "refusing to announce 127.0.0.1:" in done.stderr and "203.0.113.9" in done.stderr
    assert "--advertise HOST[:PORT]" in done.stderr
    # the environment spelling of the same flag is taken, and a routable name passes the check
    ok = subprocess.run([*argv, "--help"], capture_output=True, text=True, timeout=60,
                        env={"STRATA_ADVERTISE": "node-1.example:9"})  # fmt: skip
    assert ok.returncode == 0 and "--advertise HOST[:PORT]" in ok.stdout and "--bind" in ok.stdout


def test_node_announced_under_its_advertised_name_is_queried_there(zk_hosts: str, tmp_path: Path) -> None:
    cluster = HistoricalCluster(tmp_path, zk_hosts, unique_base("advertise"))
    segments = cluster.add_segments("wiki", range(3))
    node = cluster.historical("h1", replicas=1)
    node.args += ["--advertise", f"localhost:{node.port}"]  # bound to 127.0.0.1 by the harness
    broker = StrataProcess("broker", ["--zk", zk_hosts, "--zk-base", cluster.zk_base,
                                      "--advertise", "broker.example:18082"], tmp_path / "broker.log")  # fmt: skip
    paths = ZkPaths(cluster.zk_base)
    with running([node, broker]):
        node.start()
        name = f"localhost:{node.port}"
        with kazoo(zk_hosts) as zk:
            wait_until(lambda: len(served_ids(zk, paths).get(name, [])) == 3, 60, "3 segments announced")
            assert zk.get_children(paths.announcements) == [name]
            meta = orjson.loads(zk.get(paths.announcement(name))[0])
            assert meta["name"] == meta["host"] == name
        assert httpx.get(f"{node.url}/status", timeout=10).json()["strata"]["name"] == name
        broker.start()
        query = {"queryType": "timeseries", "dataSource": "wiki", "granularity": "all",
                 "intervals": ["2015-09-01/2015-09-04"], "aggregations": [{"type": "count", "name": "n"}]}  # fmt: skip

        def answered() -> bool:
            r = httpx.post(f"{broker.url}/druid/v2/", json=query, timeout=10)
            return r.status_code == 200 and r.json() and r.json()[0]["result"]["n"] == 20 * len(segments)

        wait_until(answered, 60, "the broker's answer through the advertised name")
        bad = httpx.post(f"{broker.url}/druid/v2/", json={"queryType": "nope"}, timeout=10)
        assert bad.status_code == 400 and bad.json()["host"] == "broker.example:18082"
