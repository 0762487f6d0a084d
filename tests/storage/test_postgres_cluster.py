"""A real historical on a real PostgreSQL metadata store: notified of publishes, serving through a
PostgreSQL outage, ingestion refused cleanly while it is down, and everything back by itself.

The server here is this module's own (it is stopped and restarted); the password travels only in a
config file, and must never show in a log, `/status` or an error message.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import httpx
import pytest

from harness.postgres import PostgresServer
from harness.processes import StrataProcess
from strata.ingestion.api import ingest
from strata.storage import MetadataStoreError, open_metadata_store
from strata.storage.metadata_store import MetadataStore
from tests.historical.segment_factory import HistoricalCluster, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

POLL_S = "120"  # far longer than any wait below: what arrives sooner came by notification


@pytest.fixture(scope="module")
def pg(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PostgresServer]:
    if not PostgresServer.available():
        pytest.skip("PostgreSQL is not installed (scripts/install-system-packages.sh test installs it)")
    server = PostgresServer(password="s3cr3t-" + tmp_path_factory.getbasetemp().name[-6:]).start()
    try:
        yield server
    finally:
        server.remove()


def _url_with_password(server: PostgresServer, db: str) -> str:
    return f"postgresql://strata:{server.password}@{server.host}:{server.port}/{db}"


def _served(node_url: str) -> int:
    return int(httpx.get(f"{node_url}/status", timeout=5).json()["strata"]["segments"])


def _rows(node_url: str) -> int:
    query = {"queryType": "timeseries", "dataSource": "wiki", "granularity": "all",
             "intervals": ["2015-09-01/2015-10-01"],
             "aggregations": [{"type": "longSum", "name": "n", "fieldName": "count"}]}  # fmt: skip
    response = httpx.post(f"{node_url}/druid/v2/", json=query, timeout=10)
    response.raise_for_status()
    return int(response.json()[0]["result"]["n"])


class _Queries(threading.Thread):
    """Queries the node without a pause, counting answers and failures (each must be `expected`)."""

    def __init__(self, node_url: str, expected: int):
        super().__init__(daemon=True)
        self.node_url, self.expected = node_url, expected
        self.ok, self.failed = 0, []
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                got = _rows(self.node_url)
                if got == self.expected:
                    self.ok += 1
                else:
                    self.failed.append(f"{got} rows, expected {self.expected}")
            except httpx.HTTPError as e:
                self.failed.append(repr(e))


def test_historical_hears_of_publishes_and_rides_out_a_postgres_restart(pg: PostgresServer, tmp_path: Path):
    url = _url_with_password(pg, "strata")
    redacted = f"postgresql://strata:***@{pg.host}:{pg.port}/strata"
    pg.create_database("strata")
    config = tmp_path / "strata.toml"
    config.write_text(f'metadata = "{url}"\n')
    cluster = HistoricalCluster(tmp_path)
    cluster.metadata_path = url  # type: ignore[assignment]  # the factory's publish takes any location
    cluster.add_segments("wiki", [0, 1])
    args = ["--deep-storage", str(cluster.deep.root), "--replicas", "1",
            "--segment-cache", str(tmp_path / "cache"), "--poll-period", POLL_S]  # fmt: skip
    node = StrataProcess("historical", args, tmp_path / "h1.log", env={"STRATA_CONFIG": str(config)})
    cluster.processes.append(node)
    try:
        node.start()
        wait_until(lambda: _served(node.url) == 2, 60, "the first two segments")

        # a publish is announced long before the next poll: the NOTIFY woke the control loop
        cluster.add_segments("wiki", [2])
        wait_until(lambda: _served(node.url) == 3, 30, "the published segment, by notification")
        assert _rows(node.url) == 60  # build_segment: 20 rows of count 1 per day

        queries = _Queries(node.url, 60)
        queries.start()
        pg.stop()
        try:
            # ingestion while the store is down: a clear error, nothing written to the store
            data = tmp_path / "rows.json"
            data.write_text(json.dumps({"timestamp": "2015-09-05T00:00:00Z", "page": "x"}) + "\n")
            done = subprocess.run(
                [sys.executable, "-m", "strata.cli.main", "--config", str(config), "ingest", "--datasource", "late",
                 "--input", str(data), "--deep-storage", str(tmp_path / "deep"), "--engine", "local"],
                capture_output=True, text=True, timeout=120,
            )  # fmt: skip
            assert done.returncode == 1, done.stderr
            assert "strata ingest: error: metadata store " + redacted in done.stderr
            assert pg.password not in done.stderr + done.stdout
            print(done.stderr)
            wait_until(lambda: queries.ok >= 20, 30, "queries answered while PostgreSQL is down")
        finally:
            pg.start()
        wait_until(lambda: queries.ok >= 40, 30, "queries answered after the restart")
        queries.stop.set()
        queries.join(15)
        assert queries.failed == [] and queries.ok > 0
        cluster.add_segments("wiki", [3])  # the node reconnects and hears of it by itself
        wait_until(lambda: _served(node.url) == 4, 60, "a segment published after the restart")
        assert _rows(node.url) == 80
        with closing(open_metadata_store(url)) as store:
            assert store.data_sources() == ["wiki"]  # the failed ingestion published nothing

        status = httpx.get(f"{node.url}/status", timeout=5).text
        for text in (status, node.log_text(), " ".join(node.argv())):
            assert pg.password not in text
    finally:
        cluster.stop_all()


class _StopsServerBeforePublish:
    """A store whose publish finds PostgreSQL gone (stopped after the segments were built)."""

    def __init__(self, store: MetadataStore, server: PostgresServer):
        self.store, self.server = store, server

    def __getattr__(self, name: str) -> object:
        return getattr(self.store, name)

    def publish(self, segments: object, *, overwrite: bool) -> None:
        self.server.stop()
        self.store.publish(segments, overwrite=overwrite)  # type: ignore[arg-type]


def test_ingestion_that_loses_postgres_before_its_publish_leaves_nothing(pg: PostgresServer, tmp_path: Path):
    url = _url_with_password(pg, "ingest")
    pg.create_database("ingest")
    data = tmp_path / "rows.json"
    data.write_text(
        "".join(json.dumps({"timestamp": f"2015-09-0{d}T00:00:00Z", "page": "x"}) + "\n" for d in (1, 2))
    )
    spec = {"type": "index_parallel", "spec": {
        "dataSchema": {"dataSource": "ev", "timestampSpec": {"column": "timestamp", "format": "iso"},
                       "dimensionsSpec": {"dimensions": ["page"]},
                       "granularitySpec": {"segmentGranularity": "day", "queryGranularity": "none", "rollup": False}},
        "ioConfig": {"type": "index_parallel", "inputSource": {"type": "local", "baseDir": str(tmp_path),
                                                                "filter": "rows.json"},
                     "inputFormat": {"type": "json"}}}}  # fmt: skip
    store = open_metadata_store(url)
    try:
        with pytest.raises(MetadataStoreError) as failed:
            ingest(spec, deep_storage=tmp_path / "deep", metadata=_StopsServerBeforePublish(store, pg))  # type: ignore[arg-type]
        assert "publishing segments failed" in str(failed.value) or "connecting failed" in str(failed.value)
        assert pg.password not in str(failed.value)
    finally:
        pg.start()
    assert store.segments(include_unused=True) == []  # the same store object works again by itself
    store.close()
    segments = list((tmp_path / "deep").rglob("*.parquet"))
    assert segments == [], "pushed files of an unpublished ingestion are removed"
