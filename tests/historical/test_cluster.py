"""Real `strata historical` processes over a real ZooKeeper, a temp deep storage and metadata store."""

from __future__ import annotations

import shutil
import threading
import time
from collections import Counter
from pathlib import Path

import httpx
import orjson
import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from strata.discovery import ZkPaths
from strata.storage import open_metadata_store
from tests.historical.segment_factory import (
    HistoricalCluster,
    as_published,
    build_segment,
    kazoo,
    served_ids,
    unique_base,
    wait_until,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


def served_count(zk_hosts: str, paths: ZkPaths) -> Counter[str]:
    with kazoo(zk_hosts) as zk:
        return Counter(sid for ids in served_ids(zk, paths).values() for sid in ids)


@pytest.mark.parametrize("replicas", [1, 2])
def test_two_historicals_announce_in_druid_layout(zk_hosts: str, tmp_path: Path, replicas: int) -> None:
    cluster = HistoricalCluster(tmp_path, zk_hosts, unique_base(f"layout{replicas}"))
    paths = ZkPaths(cluster.zk_base)
    segments = cluster.add_segments("wiki", range(12))
    expected = {s.id: s.to_json() for s in segments}
    try:
        nodes = [cluster.historical(f"h{i}", replicas=replicas).start() for i in (1, 2)]
        with kazoo(zk_hosts) as zk:
            wait_until(lambda: Counter(sid for ids in served_ids(zk, paths).values() for sid in ids)
                       == Counter({sid: replicas for sid in expected}), 60, f"each segment served {replicas}x")  # fmt: skip
            assert sorted(zk.get_children(paths.announcements)) == sorted(n.address for n in nodes)
            for node in nodes:
                data, stat = zk.get(paths.announcement(node.address))
                assert stat.ephemeralOwner != 0
                assert orjson.loads(data) == {"name": node.address, "host": node.address, "hostAndTlsPort": None,
                                              "maxSize": 0, "type": "historical", "tier": "_default_tier",
                                              "priority": 0}  # fmt: skip
                folder = paths.server_segments(node.address)
                for batch in zk.get_children(folder):
                    assert batch.startswith(f"{node.address}_historical__default_tier_")
                    data, stat = zk.get(f"{folder}/{batch}")
                    assert stat.ephemeralOwner != 0
                    for item in orjson.loads(data):
                        # as published in the metadata store, plus the row count and time span read
                        # from the file (checked against its rows in tests/segment_engine)
                        assert as_published(item) == expected[item["identifier"]]
            for node in nodes:
                node.wait_http("/status/ready", timeout=30)
        if replicas == 1:
            split = [len(served_ids_of(zk_hosts, paths, n.address)) for n in nodes]
            assert all(count > 0 for count in split), split
    finally:
        cluster.stop_all()
    with kazoo(zk_hosts) as zk:  # SIGTERM closed the sessions: nothing left announced
        assert zk.get_children(paths.announcements) == []


def served_ids_of(zk_hosts: str, paths: ZkPaths, server: str) -> list[str]:
    with kazoo(zk_hosts) as zk:
        return served_ids(zk, paths).get(server, [])


class CoverageWatcher(threading.Thread):
    """Reads the announcements in a loop and records every moment a segment looked unserved.

    Reads of different servers are not atomic, so servers are read in `order`: the one giving
    segments up first, then the one taking them. A correct hand-off (announce, then drop) can then
    never look like a gap, while a drop before the announcement shows as one.
    """

    def __init__(self, zk_hosts: str, paths: ZkPaths, wanted: set[str], order: list[str]):
        super().__init__(daemon=True)
        self.zk_hosts, self.paths, self.wanted, self.order = zk_hosts, paths, wanted, order
        self.stop_event = threading.Event()
        self.gaps: list[set[str]] = []
        self.reads = 0

    def _ids(self, zk: KazooClient, server: str) -> set[str]:
        folder = self.paths.server_segments(server)
        ids: set[str] = set()
        for batch in zk.get_children(folder) if zk.exists(folder) else []:
            try:
                ids.update(item["identifier"] for item in orjson.loads(zk.get(f"{folder}/{batch}")[0]))
            except NoNodeError:
                continue  # the batch was rewritten away between listing and reading
        return ids

    def run(self) -> None:
        with kazoo(self.zk_hosts) as zk:
            while not self.stop_event.is_set():
                served: set[str] = set()
                for server in self.order:
                    served |= self._ids(zk, server)
                if self.wanted - served:
                    self.gaps.append(self.wanted - served)
                self.reads += 1


def test_failover_and_rebalance_never_leave_a_segment_unserved(zk_hosts: str, tmp_path: Path) -> None:
    cluster = HistoricalCluster(tmp_path, zk_hosts, unique_base("failover"))
    paths = ZkPaths(cluster.zk_base)
    wanted = {s.id for s in cluster.add_segments("wiki", range(40))}
    once = Counter({sid: 1 for sid in wanted})
    try:
        h1, h2 = (cluster.historical(f"h{i}", replicas=1).start() for i in (1, 2))
        # h1 may serve all 40 alone before h2 is up: wait until both hold a share
        wait_until(lambda: served_count(zk_hosts, paths) == once and bool(served_ids_of(zk_hosts, paths, h2.address)),
                   60, "balanced over two nodes")  # fmt: skip
        h2_share = set(served_ids_of(zk_hosts, paths, h2.address))
        assert h2_share and h2_share < wanted

        assert h2.stop() is not None
        wait_until(lambda: set(served_ids_of(zk_hosts, paths, h1.address)) == wanted, 60, "h1 takes over all")

        shutil.rmtree(tmp_path / "cache-h2")  # h2 copies its share again: the hand-off takes a while
        watcher = CoverageWatcher(zk_hosts, paths, wanted, order=[h1.address, h2.address])
        watcher.start()
        try:
            h2.start()  # same name and port: the same share comes back to it
            wait_until(lambda: set(served_ids_of(zk_hosts, paths, h2.address)) == h2_share
                       and served_count(zk_hosts, paths) == once, 60, "rebalanced back")  # fmt: skip
        finally:
            watcher.stop_event.set()
            watcher.join(10)
        assert watcher.reads > 5
        assert watcher.gaps == []
    finally:
        cluster.stop_all()


def test_segments_unused_in_metadata_are_dropped_everywhere(zk_hosts: str, tmp_path: Path) -> None:
    cluster = HistoricalCluster(tmp_path, zk_hosts, unique_base("unused"))
    paths = ZkPaths(cluster.zk_base)
    segments = cluster.add_segments("wiki", range(6))
    try:
        nodes = [cluster.historical(f"h{i}", replicas=2, extra=["--drop-delay", "0"]).start() for i in (1, 2)]
        wait_until(lambda: served_count(zk_hosts, paths) == Counter({s.id: 2 for s in segments}), 60, "2x")
        cluster.mark_unused([segments[0].id])
        added = cluster.add_segments("wiki", [30])
        want = Counter({s.id: 2 for s in [*segments[1:], *added]})
        wait_until(lambda: served_count(zk_hosts, paths) == want, 60, "drop + add")
        for node in nodes:
            assert not (tmp_path / f"cache-h{nodes.index(node) + 1}" / segments[0].id).exists()
    finally:
        cluster.stop_all()


def test_a_dropped_segment_is_still_answered_until_the_drop_delay_ends(zk_hosts: str, tmp_path: Path) -> None:
    """Druid's dropSegmentDelayMillis: unannounced at once, answered until the delay ends, so a broker
    that has not yet seen the unannouncement (or the new owner) gets rows, not "missing segment"."""
    cluster = HistoricalCluster(tmp_path, zk_hosts, unique_base("dropdelay"))
    paths = ZkPaths(cluster.zk_base)
    segments = cluster.add_segments("wiki", range(2))
    gone = segments[0]
    query = {"queryType": "timeseries", "dataSource": "wiki", "granularity": "all",
             "intervals": {"type": "segments", "segments": [gone.descriptor.to_json()]},
             "aggregations": [{"type": "longSum", "name": "n", "fieldName": "count"}]}  # fmt: skip
    try:
        node = cluster.historical("h1", extra=["--drop-delay", "6"]).start()
        wait_until(
            lambda: served_count(zk_hosts, paths) == Counter({s.id: 1 for s in segments}), 60, "loaded"
        )
        cluster.mark_unused([gone.id])
        wait_until(lambda: gone.id not in served_count(zk_hosts, paths), 30, "unannounced")
        during = httpx.post(f"{node.url}/druid/v2/", json=query, timeout=10)
        assert during.status_code == 200
        # build_segment writes 20 rows of count 1 from the day's start
        assert during.json() == [{"timestamp": "2015-09-01T00:00:00.000Z", "result": {"n": 20}}]
        assert "missingSegments" not in during.headers.get("X-Druid-Response-Context", "")

        def reported_missing() -> bool:
            resp = httpx.post(f"{node.url}/druid/v2/", json=query, timeout=10)
            return "missingSegments" in resp.headers.get("X-Druid-Response-Context", "")

        wait_until(reported_missing, 30, "the node stops answering for it once the delay ends")
        wait_until(lambda: not (tmp_path / "cache-h1" / gone.id).exists(), 10, "files deleted")
    finally:
        cluster.stop_all()


def test_an_overwritten_segment_is_served_until_its_replacement_is(zk_hosts: str, tmp_path: Path) -> None:
    """Druid's coordinator marks a segment overshadowed only once the new version is loaded; here a
    historical keeps the old version announced (and answering) while the new one cannot load yet,
    so a broker never sees a gap in the timeline during an overwrite."""
    cluster = HistoricalCluster(tmp_path, zk_hosts, unique_base("overwrite"))
    paths = ZkPaths(cluster.zk_base)
    (old,) = cluster.add_segments("wiki", [0])
    new = build_segment(cluster.deep, "wiki", 0, version="2024-02-01T00:00:00.000Z", rows=30)
    files = Path(str(new.load_spec["path"])).parent
    hidden = files.with_name(files.name + ".hidden")
    query = {"queryType": "timeseries", "dataSource": "wiki", "granularity": "all",
             "intervals": ["2015-09-01/2015-09-02"],
             "aggregations": [{"type": "longSum", "name": "n", "fieldName": "count"}]}  # fmt: skip
    try:
        node = cluster.historical("h1", replicas=1).start()
        wait_until(lambda: served_count(zk_hosts, paths) == Counter({old.id: 1}), 60, "the old version")
        files.rename(hidden)  # the new version's files are not there yet: its load fails and retries
        store = open_metadata_store(cluster.metadata_path)
        try:
            store.publish([new], overwrite=True)  # marks the old version unused in the same transaction
        finally:
            store.close()
        for _ in range(8):  # several poll periods (0.5 s): the old version stays while the new cannot load
            time.sleep(0.5)
            assert served_count(zk_hosts, paths) == Counter({old.id: 1})
        answer = httpx.post(f"{node.url}/druid/v2/", json=query, timeout=10).json()
        assert answer == [{"timestamp": "2015-09-01T00:00:00.000Z", "result": {"n": 20}}]  # old: 20 rows
        hidden.rename(files)
        wait_until(lambda: served_count(zk_hosts, paths) == Counter({new.id: 1}), 60, "the new version only")
        answer = httpx.post(f"{node.url}/druid/v2/", json=query, timeout=10).json()
        assert answer == [{"timestamp": "2015-09-01T00:00:00.000Z", "result": {"n": 30}}]  # new: 30 rows
    finally:
        cluster.stop_all()
