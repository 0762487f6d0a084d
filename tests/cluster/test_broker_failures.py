"""Failures under a real broker: a replica killed mid-stream, ZooKeeper stopped and restarted.

Each test builds its own cluster (own data, own znode base). Answers are checked against DuckDB
over the raw rows: a failure may slow the broker down, never make it answer wrongly or partly.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from kazoo.client import KazooClient

from harness.processes import StrataProcess
from strata.cli.local_servers import ZooKeeperServer, free_port
from strata.ingestion.api import ingest
from strata.storage import open_metadata_store
from tests.cluster.cluster_kit import (
    SYNTHETIC,
    assert_answers,
    assert_answers_eventually,
    broker_status,
    cluster,
    raw,
    synthetic_spec,
    used_segment_ids,
    wait_settled,
    wait_until,
    write_rows,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

WIKI_DAY = "2015-09-12/2015-09-13"
NO_CACHE = {
    "useCache": False,
    "populateCache": False,
    "useResultLevelCache": False,
    "populateResultLevelCache": False,
}


def candidates(broker_url: str, data_source: str, interval: str) -> list[dict[str, Any]]:
    resp = httpx.get(f"{broker_url}/druid/v2/datasources/{data_source}/candidates",
                     params={"intervals": interval}, timeout=10)  # fmt: skip
    resp.raise_for_status()
    return list(resp.json())


def metric(node: StrataProcess, name: str, label: str = "") -> float:
    text = httpx.get(f"{node.url}/metrics", timeout=10).text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith(name) and label in line)  # fmt: skip


@dataclass
class QueryStream:
    """A thread sending timeseries queries back to back, recording every answer that is not the oracle's."""

    url: str
    body: dict[str, Any]
    want: list[tuple[Any, ...]]
    answers: list[float] = field(default_factory=list)  # monotonic time each correct answer came
    wrong: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        with httpx.Client(timeout=30) as client:
            while not self.stop.is_set():
                try:
                    resp = client.post(f"{self.url}/druid/v2/", json=self.body)
                except httpx.HTTPError as e:
                    self.wrong.append(f"transport error {e!r}")
                    continue
                context = json.loads(resp.headers.get("X-Druid-Response-Context", "{}"))
                if resp.status_code != 200:
                    self.wrong.append(f"HTTP {resp.status_code}: {resp.text[:300]}")
                elif context.get("missingSegments"):
                    self.wrong.append(f"partial: missing {context['missingSegments']}")
                else:
                    got = [(r["timestamp"], r["result"]["rows"], r["result"]["added"]) for r in resp.json()]
                    if got != self.want:
                        self.wrong.append(f"wrong answer {got[:3]}...")
                    else:
                        self.answers.append(time.monotonic())

    def after(self, t: float) -> int:
        return sum(1 for a in self.answers if a > t)


@pytest.fixture
def wiki_root(tmp_path: Path, wikipedia_sample: Path, wikipedia_index_spec: Path) -> Path:
    spec = json.loads(wikipedia_index_spec.read_text())
    spec["spec"]["ioConfig"]["inputSource"]["baseDir"] = str(wikipedia_sample.parent)
    spec["spec"]["dataSchema"]["granularitySpec"]["segmentGranularity"] = "hour"
    ingest(spec, deep_storage=tmp_path / "deep", metadata=tmp_path / "meta.db")
    return tmp_path


def test_killing_one_of_two_replicas_mid_stream_loses_no_answer(wiki_root: Path, zk_hosts: str,
                                                                wikipedia_sample: Path) -> None:  # fmt: skip
    base = f"/strata-fail-{uuid.uuid4().hex[:8]}"
    with cluster(wiki_root, zk_hosts, base, historicals=2, replicas=2) as nodes:
        wait_settled(nodes.broker, wiki_root / "meta.db", nodes.historicals)
        wait_until(lambda: [len(c["locations"]) for c in candidates(nodes.broker.url, "wikipedia", WIKI_DAY)]
                   == [2] * 24, "every hour on both replicas", 60, nodes.all)  # fmt: skip
        body = {"queryType": "timeseries", "dataSource": "wikipedia", "granularity": "hour", "intervals": [WIKI_DAY],
                "aggregations": [{"type": "count", "name": "rows"},
                                 {"type": "longSum", "name": "added", "fieldName": "added"}]}  # fmt: skip
        want = raw("SELECT strftime(date_trunc('hour', time::TIMESTAMP), '%Y-%m-%dT%H:00:00.000Z'), count(*), "
                   "sum(added) FROM RAW GROUP BY 1 ORDER BY 1", wikipedia_sample)  # fmt: skip
        stream = QueryStream(nodes.broker.url, body, [tuple(w) for w in want])
        thread = threading.Thread(target=stream.run, daemon=True)
        thread.start()
        try:
            wait_until(lambda: len(stream.answers) >= 5 or bool(stream.wrong), "answers before the kill", 60)
            killed_at = time.monotonic()
            nodes.historicals[0].kill()
            # the dead node's announcements stay in ZooKeeper until its session expires: until then
            # the broker still routes to it and must retry its segments on the survivor
            wait_until(lambda: all(len(c["locations"]) == 1 for c in candidates(nodes.broker.url, "wikipedia",
                                                                                 WIKI_DAY)),
                       "the broker to drop the dead replica", 60, nodes.all)  # fmt: skip
            noticed_at = time.monotonic()
            wait_until(
                lambda: stream.after(noticed_at) >= 5 or bool(stream.wrong), "answers after the takeover", 60
            )
        finally:
            stream.stop.set()
            thread.join(60)
        assert not stream.wrong, stream.wrong[:5]
        during = sum(1 for a in stream.answers if killed_at < a < noticed_at)
        assert during > 0, "no query ran while the dead replica was still announced"
        # the premise: the broker really sent requests to the dead node, and recovered each time
        dead = nodes.historicals[0].address
        assert metric(nodes.broker, "strata_broker_node_failures_total", f'server="{dead}"') > 0
        assert nodes.historicals[1].alive()


def test_segments_of_a_killed_only_replica_get_druids_segment_missing_answer(
    wiki_root: Path, zk_hosts: str
) -> None:
    """One replica, its historical killed: before and after the broker notices, a query answers as
    Druid's SegmentMissingException does (500, the catch-all code with that class), naming the
    segments and pointing at returnPartialResults; with it, a 200 listing them."""
    base = f"/strata-missing-{uuid.uuid4().hex[:8]}"
    with cluster(wiki_root, zk_hosts, base, historicals=1, replicas=1) as nodes:
        wait_settled(nodes.broker, wiki_root / "meta.db", nodes.historicals)
        # filtered: not a count the broker answers from segment metadata without asking the node
        body: dict[str, Any] = {
            "queryType": "timeseries", "dataSource": "wikipedia", "granularity": "all", "intervals": [WIKI_DAY],
            "aggregations": [{"type": "longSum", "name": "added", "fieldName": "added"}],
            "filter": {"type": "selector", "dimension": "channel", "value": "#en.wikipedia"}, "context": NO_CACHE,
        }  # fmt: skip
        assert httpx.post(f"{nodes.broker.url}/druid/v2/", json=body, timeout=30).status_code == 200
        nodes.historicals[0].kill()
        ids = used_segment_ids(wiki_root / "meta.db")
        for _ in range(2):  # while the dead node is still announced, then (maybe) after
            resp = httpx.post(f"{nodes.broker.url}/druid/v2/", json=body, timeout=30)
            assert resp.status_code == 500, resp.text
            error = resp.json()
            assert (error["error"], error["errorClass"], error["category"], error["errorCode"]) == (
                "Unknown exception", "org.apache.druid.segment.SegmentMissingException", "RUNTIME_FAILURE",
                "legacyQueryException")  # fmt: skip
            assert error["errorMessage"].startswith("No results found for segments[")
            assert "returnPartialResults" in error["errorMessage"]
            listed = error["errorMessage"].split("[", 1)[1].split("]", 1)[0]
            assert listed.endswith(f" and {len(ids) - 20} more")  # 24 hourly segments: 20 named
            assert set(listed.rsplit(" and ", 1)[0].split(", ")) <= ids
            partial = {**body, "context": {**NO_CACHE, "returnPartialResults": True}}
            resp = httpx.post(f"{nodes.broker.url}/druid/v2/", json=partial, timeout=30)
            assert resp.status_code == 200, resp.text
            context = json.loads(resp.headers["X-Druid-Response-Context"])
            assert len(context["missingSegments"]) == len(ids)
            time.sleep(1)


def rows(days: range, tag: str) -> list[dict[str, Any]]:
    return [{"ts": f"2020-03-{d:02d}T{h:02d}:30:00Z", "k": f"{tag}{(d + h) % 4}", "n": d * 100 + h}
            for d in days for h in range(0, 24, 3)]  # fmt: skip


@pytest.fixture
def own_zookeeper(tmp_path: Path) -> Iterator[ZooKeeperServer]:
    """A ZooKeeper of this test alone, which it may stop and restart (same port, same data)."""
    server = ZooKeeperServer(port=free_port(), data_dir=tmp_path / "zk")
    server.start()
    try:
        yield server
    finally:
        server.stop()


def announced(zk: ZooKeeperServer, base: str) -> list[str]:
    client = KazooClient(hosts=zk.address, timeout=5)
    client.start(timeout=10)
    try:
        return sorted(client.get_children(f"{base}/announcements"))
    finally:
        client.stop()
        client.close()


def test_zookeeper_outage_keeps_the_last_view_and_recovers(
    tmp_path: Path, own_zookeeper: ZooKeeperServer
) -> None:
    zk, base = own_zookeeper, f"/strata-zk-outage-{uuid.uuid4().hex[:8]}"
    stores: dict[str, Any] = {"deep_storage": tmp_path / "deep", "metadata": tmp_path / "meta.db"}
    first = rows(range(1, 5), "a")
    ingest(synthetic_spec("outage", write_rows(tmp_path / "in" / "first.json", first), "day"), **stores)
    oracle = write_rows(tmp_path / "oracle" / "first.json", first)
    interval = "2020-03-01/2020-03-10"
    with cluster(tmp_path, zk.address, base, historicals=2, replicas=1) as nodes:
        wait_settled(nodes.broker, tmp_path / "meta.db", nodes.historicals)
        assert_answers(nodes.broker, "outage", interval, oracle, SYNTHETIC)
        servers = sorted(h.address for h in nodes.historicals)
        assert announced(zk, base) == servers

        zk.stop()
        wait_until(lambda: broker_status(nodes.broker)["inventory"]["connected"] is False,
                   "the broker to report its inventory disconnected", 30, nodes.all)  # fmt: skip
        # new segments published during the outage cannot be announced: the broker keeps its last view
        mid = rows(range(8, 10), "m")
        ingest(synthetic_spec("outage", write_rows(tmp_path / "in" / "mid.json", mid), "day"), **stores)
        # longer than the 10 s session timeout of every client: the last view keeps serving all along
        outage_end = time.monotonic() + 12
        checks = 0
        while time.monotonic() < outage_end:
            assert_answers(nodes.broker, "outage", interval, oracle, SYNTHETIC)
            checks += 1
            time.sleep(0.5)
        status = broker_status(nodes.broker)
        assert status["inventory"]["connected"] is False and status["inventory"]["outages"] >= 1
        assert status["segments"] == 4 and checks >= 3

        zk.start()  # same port, same data directory
        wait_until(lambda: broker_status(nodes.broker)["inventory"]["connected"] is True,
                   "the broker to reconnect", 60, nodes.all)  # fmt: skip
        wait_until(lambda: announced(zk, base) == servers, "both historicals announced again", 60, nodes.all)
        wait_settled(nodes.broker, tmp_path / "meta.db", nodes.historicals)
        assert_answers_eventually(nodes.broker, "outage", interval,
                                  write_rows(tmp_path / "oracle" / "mid.json", first + mid), SYNTHETIC)  # fmt: skip

        # a change made after the restart reaches the broker too: drop the day-1 segment
        store = open_metadata_store(tmp_path / "meta.db")
        try:
            (day1,) = [
                s.id for s in store.used_segments("outage") if str(s.interval).startswith("2020-03-01")
            ]
            assert store.mark_unused([day1]) == 1
        finally:
            store.close()
        wait_settled(nodes.broker, tmp_path / "meta.db", nodes.historicals)
        rest = [r for r in first if not r["ts"].startswith("2020-03-01")] + mid
        assert_answers_eventually(nodes.broker, "outage", interval,
                                  write_rows(tmp_path / "oracle" / "rest.json", rest), SYNTHETIC)  # fmt: skip
        assert all(h.alive() for h in nodes.all)
