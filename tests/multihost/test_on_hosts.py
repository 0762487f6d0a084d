"""Strata on several hosts (network namespaces; nothing shared but the network): a Spark cluster
ingests the wikipedia sample into S3 + PostgreSQL; the broker, the Spark reader and writer and the
real-time node work across hosts; a historical cut off, PostgreSQL down and the S3 server
restarted lose no query and announce nothing corrupt. Answers are checked against plain Python
over the raw rows."""

from __future__ import annotations

import gzip
import json
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from harness.netns import unavailable
from strata.cli.quickstart import TOP_PAGES
from strata.data import WIKIPEDIA_INDEX_SPEC, WIKIPEDIA_SAMPLE
from tests.multihost.cluster import HostsCluster, hosts_cluster, wait_until

WHY = unavailable()
pytestmark = [pytest.mark.integration, pytest.mark.timeout(600),
              pytest.mark.skipif(WHY is not None, reason=f"no network namespaces here: {WHY}")]  # fmt: skip

COUNT = {"queryType": "timeseries", "dataSource": "wikipedia", "granularity": "all",
         "intervals": ["2015-09-12/2015-09-13"],
         "aggregations": [{"type": "count", "name": "rows"}, {"type": "longSum", "name": "added", "fieldName": "added"}]}  # fmt: skip


WRITTEN = 1000  # rows df.write.format("strata") publishes


def _ms(text: str) -> int:
    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC).timestamp() * 1000)


@pytest.fixture(scope="module")
def raw_rows() -> list[dict[str, Any]]:
    with gzip.open(WIKIPEDIA_SAMPLE, "rt") as f:
        return [json.loads(line) for line in f]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostsCluster]:
    with hosts_cluster(tmp_path_factory.mktemp("hosts")) as c:
        # Druid's quickstart spec as is (typed numeric columns, one day segment: the top-pages answer
        # is exact, as topN over several segments is approximate by design), from every host's copy
        spec = json.loads(WIKIPEDIA_INDEX_SPEC.read_text())
        spec["spec"]["ioConfig"]["inputSource"]["baseDir"] = str(WIKIPEDIA_SAMPLE.parent)  # each host's copy
        spec_file = c.host("driver").dir("specs") / "wikipedia-index.json"
        spec_file.write_text(json.dumps(spec))
        flags = [str(spec_file), "--engine", "spark", "--spark-master", c.spark_master]
        for key, value in c.spark_conf().items():
            flags += ["--spark-conf", f"{key}={value}"]
        c.launch_nodes()  # they start while Spark ingests, and load the segments once published
        done = c.on_driver(
            [sys.executable, "-m", "strata.cli.main", "ingest", *flags, *c.storage_flags(), "--json"]
        )
        assert done.returncode == 0, done.stderr[-4000:]
        summary = json.loads(done.stdout.strip().splitlines()[-1])
        assert summary["engine"] == "spark" and summary["rowsIngested"] == 39_244
        c.wait_nodes()
        yield c


def _count_answer(c: HostsCluster) -> Any:
    return c.query(COUNT)[0]["result"]


def _wait_all_loaded(c: HostsCluster, raw: list[dict[str, Any]]) -> None:
    want = {"rows": len(raw), "added": sum(r["added"] for r in raw)}
    wait_until(
        lambda: _count_answer(c) == want, "every wikipedia segment served", 120, list(c.nodes.values())
    )


def test_top_pages_through_the_broker(cluster: HostsCluster, raw_rows: list[dict[str, Any]]) -> None:
    _wait_all_loaded(cluster, raw_rows)
    oracle = Counter(r["page"] for r in raw_rows if r["time"].startswith("2015-09-12"))
    got = cluster.query(TOP_PAGES)[0]["result"]
    assert [g["count"] for g in got] == [n for _, n in oracle.most_common(10)]
    assert all(oracle[g["page"]] == g["count"] for g in got)
    # the segments live in S3 and PostgreSQL: each historical holds every one (replicas 2)
    from strata.storage import open_metadata_store

    with closing(open_metadata_store(cluster.metadata)) as store:
        used = store.used_segments("wikipedia")
    assert len(used) == 1 and all(
        s.load_spec["type"] == "s3_zip" or "s3" in json.dumps(s.load_spec) for s in used
    )
    for name in ("hist1", "hist2"):
        node = cluster.nodes[name]
        status = httpx.get(f"{node.url}/status", timeout=10).json()["strata"]
        assert status["name"] == node.address and status["segments"] == 1


@pytest.fixture(scope="module")
def spark_jobs(cluster: HostsCluster, raw_rows: list[dict[str, Any]]) -> Path:
    """One Spark application on the cluster: the reader's rows (a file), then the writer's publish."""
    _wait_all_loaded(cluster, raw_rows)
    out = cluster.host("driver").root / "read.jsonl"
    done = cluster.on_driver([sys.executable, "-m", "tests.multihost.spark_job", cluster.spark_master,
                              json.dumps(cluster.spark_conf()), cluster.broker.url, str(out), str(WRITTEN),
                              f"{cluster.deep_storage}/written", cluster.s3_endpoint, cluster.metadata])  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    return out


def test_spark_reader_on_the_cluster_equals_the_raw_rows(
    spark_jobs: Path, raw_rows: list[dict[str, Any]]
) -> None:
    got = Counter(tuple(json.loads(line)) for line in spark_jobs.read_text().splitlines())
    want = Counter((_ms(r["time"]), r["page"], r["user"], r["added"], r["deleted"]) for r in raw_rows)
    assert got == want


def test_spark_writer_on_the_cluster_publishes_once(cluster: HostsCluster, spark_jobs: Path) -> None:
    from strata.storage import open_metadata_store

    with closing(open_metadata_store(cluster.metadata)) as store:
        used = store.used_segments("written")
    assert used and len({s.version for s in used}) == 1  # one publish, one version
    assert len({s.id for s in used}) == len(used)
    assert all("s3" in json.dumps(s.load_spec) for s in used)
    body = {"queryType": "timeseries", "dataSource": "written", "granularity": "all",
            "intervals": ["2015-09-12/2015-09-13"],
            "aggregations": [{"type": "count", "name": "rows"}, {"type": "longSum", "name": "n", "fieldName": "n"}]}  # fmt: skip
    want = [{"rows": WRITTEN, "n": WRITTEN * (WRITTEN - 1) // 2}]
    wait_until(lambda: [r["result"] for r in cluster.query(body)] == want, "the written rows served", 120,
               list(cluster.nodes.values()))  # fmt: skip


def test_realtime_events_counted_at_once_and_handed_off_through_s3(cluster: HostsCluster) -> None:
    rt = cluster.nodes["rt"]
    events = [
        {"ts": f"2015-09-12T0{i % 3}:{i % 60:02d}:00.000Z", "k": f"k{i % 4}", "n": i} for i in range(500)
    ]
    pushed = httpx.post(f"{rt.url}/v1/push/live", json=events, timeout=30)
    assert pushed.status_code == 200, pushed.text
    body = {"queryType": "timeseries", "dataSource": "live", "granularity": "all",
            "intervals": ["2015-09-12/2015-09-13"],
            "aggregations": [{"type": "count", "name": "rows"}, {"type": "longSum", "name": "n", "fieldName": "n"}]}  # fmt: skip
    want = [{"rows": 500, "n": sum(range(500))}]
    # counted at once: the broker learns the live segments from ZooKeeper as the node announces them
    wait_until(lambda: [r["result"] for r in cluster.query(body)] == want, "the live rows counted", 10, [rt])
    handoff = httpx.post(f"{rt.url}/v1/push/live/handoff", timeout=30)
    assert handoff.status_code == 200, handoff.text
    live_ids = set(handoff.json()["handingOff"])
    assert len(live_ids) == 3

    def handed_off() -> bool:
        return httpx.get(f"{rt.url}/status", timeout=10).json()["strata"]["segments"] == 0

    wait_until(
        handed_off, "the historicals to take the live segments over", 120, list(cluster.nodes.values())
    )
    from strata.storage import open_metadata_store

    with closing(open_metadata_store(cluster.metadata)) as store:
        published = {s.id: s for s in store.used_segments("live")}
    assert live_ids <= set(published)
    assert all("s3" in json.dumps(published[i].load_spec) for i in live_ids)
    assert [r["result"] for r in cluster.query(body)] == want


class QueryLoop:
    """Queries without pause from the client host until stopped; every answer and failure kept."""

    def __init__(self, c: HostsCluster, body: dict[str, Any]):
        self.c, self.body = c, body
        self.answers: list[Any] = []
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                response = httpx.post(f"{self.c.broker.url}/druid/v2/", json=self.body, timeout=60)
                if response.status_code == 200:
                    self.answers.append([r["result"] for r in response.json()])
                else:
                    self.failures.append(f"HTTP {response.status_code}: {response.text[:300]}")
            except httpx.HTTPError as e:
                self.failures.append(f"{type(e).__name__}: {e}")

    def __enter__(self) -> QueryLoop:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(90)


def _want_count(raw: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"rows": len(raw), "added": sum(r["added"] for r in raw)}]


def _historicals_known(c: HostsCluster) -> int:
    """How many historicals the broker's view holds (from their ZooKeeper announcements)."""
    sql = "SELECT COUNT(*) AS n FROM sys.servers WHERE server_type = 'historical'"
    response = httpx.post(f"{c.broker.url}/druid/v2/sql", json={"query": sql}, timeout=10)
    response.raise_for_status()
    return int(response.json()[0]["n"])


def _node_failures(c: HostsCluster, server: str) -> float:
    text = httpx.get(f"{c.broker.url}/metrics", timeout=10).text
    prefix = f'strata_broker_node_failures_total{{server="{server}"}} '
    return sum(float(line[len(prefix) :]) for line in text.splitlines() if line.startswith(prefix))


def test_historical_cut_off_during_queries_loses_none(
    cluster: HostsCluster, raw_rows: list[dict[str, Any]]
) -> None:
    _wait_all_loaded(cluster, raw_rows)
    want = _want_count(raw_rows)
    victim, node = cluster.host("hist1"), cluster.nodes["hist1"]
    served = httpx.get(f"{node.url}/status", timeout=5).json()["strata"]["segments"]
    with QueryLoop(cluster, COUNT) as loop:
        wait_until(lambda: len(loop.answers) >= 5, "queries under way", 30)
        victim.cut()
        try:
            # past the ZooKeeper session timeout (10 s): the broker forgets the lost host
            wait_until(lambda: _historicals_known(cluster) == 1, "the broker to forget the cut-off host", 60,
                       [cluster.broker])  # fmt: skip
        finally:
            victim.reconnect()
        # queries go on while the host comes back and announces itself again
        wait_until(lambda: _historicals_known(cluster) == 2, "the reconnected host announced again", 60,
                   [cluster.broker, node])  # fmt: skip
        time.sleep(1)
    assert loop.failures == []
    assert len(loop.answers) > 10 and all(a == want for a in loop.answers)
    # the cut was felt: requests to the lost host failed over to the replica (the broker's count)
    assert _node_failures(cluster, node.address) > 0
    wait_until(lambda: httpx.get(f"{node.url}/status", timeout=5).json()["strata"]["segments"] == served,
               "the reconnected historical serving again", 60, [node])  # fmt: skip


def test_postgres_stopped_for_ten_seconds_fails_no_query(
    cluster: HostsCluster, raw_rows: list[dict[str, Any]]
) -> None:
    _wait_all_loaded(cluster, raw_rows)
    assert cluster.pg is not None
    want = _want_count(raw_rows)
    with QueryLoop(cluster, COUNT) as loop:
        wait_until(lambda: len(loop.answers) >= 5, "queries under way", 30)
        cluster.pg.stop()
        try:
            time.sleep(10)
        finally:
            cluster.pg.start()
        time.sleep(2)
    assert loop.failures == []
    assert len(loop.answers) > 10 and all(a == want for a in loop.answers)


def test_s3_restarted_while_a_historical_pulls(cluster: HostsCluster, tmp_path: Path) -> None:
    """Segments whose objects are in S3 are published while the S3 server is down: the
    historicals fail to pull, retry, and load them once it is back; every answer is whole."""
    from strata.storage import open_metadata_store

    s3 = cluster.s3
    assert s3 is not None
    rows = [{"ts": f"2015-09-13T{h:02d}:{m:02d}:00Z", "k": f"k{m % 3}", "n": h * 60 + m}
            for h in range(4) for m in range(0, 60, 2)]  # fmt: skip
    driver = cluster.host("driver")
    source = driver.dir("late") / "late.json"
    source.write_text("\n".join(json.dumps(r) for r in rows))
    # the objects go to S3 now; the segments are published (in PostgreSQL) only while S3 is down
    staging_meta = driver.dir("late") / "unpublished.db"
    done = cluster.on_driver([sys.executable, "-m", "strata.cli.main", "ingest", "--datasource", "late", "--input",
                              str(source), "--timestamp-column", "ts", "--segment-granularity", "hour",
                              "--deep-storage", cluster.deep_storage, "--s3-endpoint", cluster.s3_endpoint,
                              "--metadata", str(staging_meta), "--json"])  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    with closing(open_metadata_store(staging_meta)) as store:
        segments = store.used_segments("late")
    assert len(segments) == 4
    published: list[BaseException | None] = []

    def publish_while_down() -> None:
        try:
            wait_until(lambda: not s3.serving(), "the S3 server down", 60)
            with closing(open_metadata_store(cluster.metadata)) as store:
                store.publish(segments, overwrite=False)
            published.append(None)
        except BaseException as e:  # reported below, on the test's thread
            published.append(e)

    publisher = threading.Thread(target=publish_while_down, daemon=True)
    publisher.start()
    # restarted from this thread: the server dies with the thread that started it (its
    # parent-death signal), so not from a short-lived one
    s3.restart(down_s=8.0)
    publisher.join(60)
    assert published == [None], published
    body = {"queryType": "timeseries", "dataSource": "late", "granularity": "hour",
            "intervals": ["2015-09-13/2015-09-14"],
            "aggregations": [{"type": "count", "name": "rows"}, {"type": "longSum", "name": "n", "fieldName": "n"}]}  # fmt: skip
    want = [{"timestamp": f"2015-09-13T{h:02d}:00:00.000Z",
             "result": {"rows": 30, "n": sum(h * 60 + m for m in range(0, 60, 2))}} for h in range(4)]  # fmt: skip
    nodes = [cluster.nodes["hist1"], cluster.nodes["hist2"]]

    def each_replica_whole() -> bool:  # each historical alone answers whole: nothing corrupt announced
        return all(httpx.post(f"{n.url}/druid/v2/", json=body, timeout=30).json() == want for n in nodes)

    wait_until(each_replica_whole, "both historicals to load the late segments after the restart", 120, nodes)
    assert cluster.query(body) == want
