"""memcached killed under a running broker: answers stay right and the cache costs nothing.

A real broker (`--cache memcached`) over a real historical and a real memcached. The memcached is
killed between queries; a listener that accepts connections and never answers then takes its port
and counts every connection, so "no connect attempt per query" is observed, not assumed: while the
breaker is open only its background probe connects (once per probe interval, 1 s). Then memcached
comes back on the same port and the breaker closes by itself.
"""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import httpx
import pytest

from harness.processes import StrataProcess, running
from strata.cli.local_servers import MemcachedServer, free_port
from tests.historical.segment_factory import HistoricalCluster, wait_until
from tests.lifecycle.test_metrics_scrape import ROWS_PER_SEGMENT, TIMESERIES, scrape, value

pytestmark = [
    pytest.mark.integration,
    pytest.mark.timeout(120),
    pytest.mark.skipif(not MemcachedServer.available(), reason="memcached is not installed"),
]

DAYS = [0, 1, 2, 3]
PROBE_INTERVAL_S = 1.0  # MemcachedCache's default retry_interval_s, which the broker uses


class SilentListener:
    """Accepts and holds connections on a port without answering; counts them."""

    def __init__(self, port: int):
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", port))
        self.sock.listen(64)
        self.sock.settimeout(0.1)
        self.accepted = 0
        self.held: list[socket.socket] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except (TimeoutError, OSError):
                continue
            self.accepted += 1
            self.held.append(conn)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        for conn in self.held:
            conn.close()
        self.sock.close()


def query_rows(url: str) -> int:
    return int(httpx.post(url + "/druid/v2/", json=TIMESERIES, timeout=30).json()[0]["result"]["rows"])


def test_killed_memcached_opens_the_breaker_and_recovers(tmp_path: Path) -> None:
    expected = ROWS_PER_SEGMENT * len(DAYS)  # build_segment writes 20 rows a day
    cluster = HistoricalCluster(tmp_path)
    cluster.add_segments("wiki", DAYS)
    port = free_port()
    memcached = MemcachedServer(port=port).start()
    historical = cluster.historical("h1", zk=False)
    broker = StrataProcess("broker", [], tmp_path / "broker.log")
    listener: SilentListener | None = None
    try:
        with running([historical, broker]):
            historical.start().wait_http("/status/ready", timeout=60)
            broker.args = ["--discovery", "http", "--nodes", historical.address, "--cache", "memcached",
                           "--memcached", memcached.address, "--result-cache", "off"]  # fmt: skip
            broker.start()
            wait_until(lambda: httpx.get(broker.url + "/druid/v2/datasources", timeout=5).json() == ["wiki"],
                       30, "the broker to see wiki")  # fmt: skip
            assert query_rows(broker.url) == expected  # populates memcached
            assert query_rows(broker.url) == expected
            status = httpx.get(broker.url + "/status/cache", timeout=5).json()
            assert status["query"]["hits"] == len(DAYS)
            assert status["breakers"] == {memcached.address: {"state": "closed", "trips": 0}}

            memcached.kill()
            listener = SilentListener(port)
            started, answered = time.monotonic(), 0
            while answered < 40:
                assert query_rows(broker.url) == expected
                answered += 1
            elapsed = time.monotonic() - started
            status = httpx.get(broker.url + "/status/cache", timeout=5).json()
            assert status["breakers"][memcached.address] == {"state": "open", "trips": 1}
            assert status["query"]["bypassed"] >= (answered - 1) * len(DAYS)
            # only the probe connects: at most one per interval (plus one in flight), never one per query
            assert listener.accepted <= elapsed / PROBE_INTERVAL_S + 2 < answered
            metrics = scrape(broker.url)
            assert value(metrics, "strata_broker_cache_memcached_breaker_open", server=memcached.address) == 1
            assert value(metrics, "strata_broker_cache_memcached_breaker_trips_total",
                         server=memcached.address) == 1  # fmt: skip

            listener.close()
            listener = None
            memcached = MemcachedServer(port=port).start()  # back, empty
            wait_until(lambda: httpx.get(broker.url + "/status/cache", timeout=5).json()["breakers"][
                memcached.address]["state"] == "closed", 30, "the breaker to close")  # fmt: skip
            hits = httpx.get(broker.url + "/status/cache", timeout=5).json()["query"]["hits"]
            assert query_rows(broker.url) == expected  # populates again
            assert query_rows(broker.url) == expected
            assert httpx.get(broker.url + "/status/cache", timeout=5).json()["query"]["hits"] == hits + len(
                DAYS
            )
    finally:
        if listener is not None:
            listener.close()
        memcached.stop()
