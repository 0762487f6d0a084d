"""One `strata historical` without ZooKeeper: change feed, cache reuse on restart, bad segments."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.historical.segment_factory import HistoricalCluster, as_published, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

FEED = "/druid-internal/v1/segments"


def feed(url: str, **params: Any) -> httpx.Response:
    return httpx.get(url + FEED, params=params, timeout=30)


def requests_of(body: dict[str, Any]) -> list[tuple[str, str]]:
    return [(r["action"], r["identifier"]) for r in body["requests"]]


def test_change_feed(tmp_path: Path) -> None:
    cluster = HistoricalCluster(tmp_path)
    segments = cluster.add_segments("wiki", range(3))
    try:
        node = cluster.historical("h1", zk=False).start()
        node.wait_http("/status/ready", timeout=30)
        full = feed(node.url, counter=-1, timeout=1000)
        assert full.status_code == 200
        body = full.json()
        assert body["resetCounter"] is False and body["resetCause"] is None
        assert sorted(requests_of(body)) == sorted(("load", s.id) for s in segments)
        by_id = {r["identifier"]: r for r in body["requests"]}
        assert all(
            s.to_json() == as_published({k: v for k, v in by_id[s.id].items() if k != "action"})
            for s in segments
        )
        counter = body["counter"]

        # nothing new: the long-poll ends empty after its timeout
        assert (
            feed(node.url, counter=counter["counter"], hash=counter["hash"], timeout=200).status_code == 204
        )

        # a long-poll in flight returns as soon as a new segment is loaded and announced
        answer: list[httpx.Response] = []
        poll = threading.Thread(target=lambda: answer.append(
            feed(node.url, counter=counter["counter"], hash=counter["hash"], timeout=60_000)))  # fmt: skip
        poll.start()
        added = cluster.add_segments("wiki", [10])
        poll.join(60)
        assert answer and answer[0].status_code == 200
        delta = answer[0].json()
        assert requests_of(delta) == [("load", added[0].id)]
        assert delta["counter"]["counter"] > counter["counter"]

        cluster.mark_unused([segments[0].id])
        position = delta["counter"]
        wait_until(lambda: feed(node.url, counter=position["counter"], hash=position["hash"], timeout=100)
                   .status_code == 200, 30, "drop delta")  # fmt: skip
        drop = feed(node.url, counter=position["counter"], hash=position["hash"], timeout=100).json()
        assert requests_of(drop) == [("drop", segments[0].id)]

        reset = feed(node.url, counter=position["counter"], hash=position["hash"] + 1, timeout=100)
        assert reset.status_code == 200
        assert reset.json()["resetCounter"] is True and reset.json()["resetCause"]
        assert feed(node.url, counter=10**6, hash=0, timeout=100).json()["resetCounter"] is True
        for bad in (
            {"counter": -1, "timeout": 0},
            {"counter": -1, "timeout": -5},
            {"counter": "x", "timeout": 5},
        ):
            assert feed(node.url, **bad).status_code == 400
        assert node.alive()
    finally:
        cluster.stop_all()


def cache_files(root: Path, name: str = "index.parquet") -> dict[str, tuple[int, int]]:
    return {p.parent.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in root.glob(f"*/{name}")}


def metric(url: str, name: str) -> float:
    for line in httpx.get(url + "/metrics").text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"metric {name} not found")


def test_restart_reuses_the_segment_cache(tmp_path: Path) -> None:
    cluster = HistoricalCluster(tmp_path)
    segments = cluster.add_segments("wiki", range(5))
    node = cluster.historical("h1", zk=False)
    try:
        node.start().wait_http("/status/ready", timeout=30)
        before = cache_files(tmp_path / "cache-h1")
        copies = cache_files(tmp_path / "cache-h1", "index.arrow")  # the default --segment-cache-format
        assert sorted(before) == sorted(copies) == sorted(s.id for s in segments)
        assert metric(node.url, 'strata_historical_segment_loads_total{source="deep_storage"}') == 5
        node.stop()
        node.start().wait_http("/status/ready", timeout=30)
        assert cache_files(tmp_path / "cache-h1") == before  # same inode and mtime: nothing copied
        assert cache_files(tmp_path / "cache-h1", "index.arrow") == copies  # nor written again
        assert metric(node.url, 'strata_historical_segment_loads_total{source="cache"}') == 5
        assert metric(node.url, "strata_historical_segment_copied_bytes_total") == 0
        assert httpx.get(node.url + "/status").json()["strata"]["segments"] == 5
        assert rows_by_page(node.url) == expected_rows_by_page(5)
        node.stop()
        node = cluster.historical("h1", zk=False, extra=["--segment-cache-format", "parquet"])
        node.start().wait_http("/status/ready", timeout=30)
        assert cache_files(tmp_path / "cache-h1", "index.arrow") == {}  # copies of the earlier run go
        assert cache_files(tmp_path / "cache-h1") == before
        assert rows_by_page(node.url) == expected_rows_by_page(5)
    finally:
        cluster.stop_all()


def rows_by_page(url: str) -> dict[str, int]:
    query = {"queryType": "groupBy", "dataSource": "wiki", "intervals": ["2015-09-01/2015-10-01"],
             "granularity": "all", "dimensions": ["page"],
             "aggregations": [{"type": "longSum", "name": "n", "fieldName": "count"}]}  # fmt: skip
    return {r["event"]["page"]: r["event"]["n"] for r in httpx.post(url + "/druid/v2/", json=query).json()}


def expected_rows_by_page(segments: int) -> dict[str, int]:
    """What `build_segment` writes: 20 rows a segment, page `p{i % 3}`, count 1."""
    return {f"p{k}": segments * sum(1 for i in range(20) if i % 3 == k) for k in range(3)}


def test_broken_segments_are_not_announced_and_the_rest_is_served(tmp_path: Path) -> None:
    cluster = HistoricalCluster(tmp_path)
    good = cluster.add_segments("wiki", range(3))
    broken = cluster.add_segments("wiki", [7, 8])
    Path(broken[0].load_spec["path"]).unlink()
    truncated = Path(broken[1].load_spec["path"])
    truncated.write_bytes(truncated.read_bytes()[:100])
    try:
        node = cluster.historical("h1", zk=False).start()
        node.wait_http("/status/ready", timeout=30)  # failed loads do not block readiness
        body = feed(node.url, counter=-1, timeout=100).json()
        assert sorted(requests_of(body)) == sorted(("load", s.id) for s in good)
        status = httpx.get(node.url + "/status").json()["strata"]
        assert status["segments"] == 3 and status["failedLoads"] == 2
        wait_until(
            lambda: metric(node.url, "strata_historical_segment_load_failures_total") >= 4, 30, "retries"
        )
        assert sorted(
            p.name for p in (tmp_path / "cache-h1").iterdir() if not p.name.startswith(".")
        ) == sorted(s.id for s in good)
        assert node.alive()
    finally:
        cluster.stop_all()


def test_stop_answers_a_brokers_long_poll_and_exits_cleanly(tmp_path: Path) -> None:
    """SIGTERM while a broker's change-feed poll waits: the poll gets its empty answer at once and
    the node exits 0 well within the drain time, with no cancelled request in its log."""
    cluster = HistoricalCluster(tmp_path)
    cluster.add_segments("wiki", range(1))
    try:
        node = cluster.historical("h1", zk=False, extra=["--drain-seconds", "20"]).start()
        node.wait_http("/status/ready", timeout=30)
        counter = feed(node.url, counter=-1, timeout=1000).json()["counter"]
        answer: list[httpx.Response] = []
        poll = threading.Thread(target=lambda: answer.append(
            feed(node.url, counter=counter["counter"], hash=counter["hash"], timeout=60_000)))  # fmt: skip
        poll.start()
        time.sleep(0.5)  # the poll is waiting
        began = time.monotonic()
        assert node.proc is not None
        node.proc.send_signal(signal.SIGTERM)
        poll.join(10)
        assert [r.status_code for r in answer] == [204]
        assert node.proc.wait(15) == 0
        assert time.monotonic() - began < 10  # not the 20 s drain
        assert "Exception in ASGI application" not in node.log_text()
    finally:
        cluster.stop_all()
