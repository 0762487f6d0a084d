"""The per-segment cache through real processes: ZooKeeper, memcached, historicals, brokers.

Answers are checked against DuckDB over the raw rows; "answered from the cache" is checked by
counting the queries each data node received (its Prometheus counter).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import httpx
import pytest

from harness.processes import StrataProcess
from strata.cli.local_servers import MemcachedServer, free_port
from strata.ingestion.api import ingest

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

DAY1, DAY2 = "2015-09-12/2015-09-13", "2015-09-13/2015-09-14"


def rows(sql: str, source: Path) -> list[tuple[Any, ...]]:
    rel = f"read_json('{source}', format='newline_delimited')"
    return duckdb.execute(sql.replace("RAW", rel)).fetchall()


def hourly_added(source: Path) -> list[tuple[str, int]]:
    return [
        (ts, total)
        for ts, total in rows(
            "SELECT strftime(date_trunc('hour', time::TIMESTAMP), '%Y-%m-%dT%H:00:00.000Z') h, sum(added) "
            "FROM RAW GROUP BY h ORDER BY h",
            source,
        )
    ]


def timeseries(interval: str, data_source: str = "wikipedia", **context: Any) -> dict[str, Any]:
    return {"queryType": "timeseries", "dataSource": data_source, "granularity": "hour", "intervals": [interval],
            "aggregations": [{"type": "longSum", "name": "added", "fieldName": "added"}],
            "context": {"queryId": uuid.uuid4().hex, **context}}  # fmt: skip


def post(broker: StrataProcess, body: dict[str, Any]) -> Any:
    resp = httpx.post(f"{broker.url}/druid/v2/", json=body, timeout=60)
    assert resp.status_code == 200, resp.text
    return resp.json()


def as_pairs(answer: list[dict[str, Any]]) -> list[tuple[str, int]]:
    return [(r["timestamp"], r["result"]["added"]) for r in answer]


def node_queries(node: StrataProcess) -> float:
    text = httpx.get(f"{node.url}/metrics", timeout=10).text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("strata_historical_queries_total{"))  # fmt: skip


def cache_status(broker: StrataProcess) -> dict[str, Any]:
    return httpx.get(f"{broker.url}/status/cache", timeout=10).json()


def wait_until(predicate: Any, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.3)


def segments_seen(broker: StrataProcess, interval: str, data_source: str = "wikipedia") -> int:
    body = {"queryType": "segmentMetadata", "dataSource": data_source, "intervals": [interval],
            "analysisTypes": []}  # fmt: skip
    resp = httpx.post(f"{broker.url}/druid/v2/", json=body, timeout=30)
    return len(resp.json()) if resp.status_code == 200 else -1


def hour_spec(source: Path, data_source: str = "wikipedia") -> dict[str, Any]:
    return {"type": "index_parallel", "spec": {
        "dataSchema": {"dataSource": data_source, "timestampSpec": {"column": "time", "format": "iso"},
                       "dimensionsSpec": {"dimensions": ["channel", "page", "user", {"type": "long", "name": "added"}]},
                       "metricsSpec": [], "granularitySpec": {"segmentGranularity": "hour", "rollup": False}},
        "ioConfig": {"type": "index_parallel", "inputFormat": {"type": "json"},
                     "inputSource": {"type": "local", "baseDir": str(source.parent), "filter": source.name}}}}  # fmt: skip


@pytest.fixture(scope="module")
def cluster(
    tmp_path_factory: pytest.TempPathFactory, zk_hosts: str, wikipedia_sample: Path
) -> Iterator[dict[str, Any]]:
    """Two historicals serving 2015-09-12 by the hour, and a node announcing itself as `realtime`
    serving the same edits moved to 2015-09-13 (a stand-in until `strata realtime` exists)."""
    root = tmp_path_factory.mktemp("cache-cluster")
    day1 = root / "day1.json"
    duckdb.execute(f"COPY (SELECT time, channel, page, \"user\", added FROM read_json('{wikipedia_sample}', "
                   f"format='newline_delimited')) TO '{day1}' (FORMAT json)")  # fmt: skip
    day2 = root / "day2.json"
    duckdb.execute(f"COPY (SELECT strftime(time::TIMESTAMP + INTERVAL 1 DAY, '%Y-%m-%dT%H:%M:%S.%gZ') AS time, "
                   f"channel, page, \"user\", added * 2 AS added FROM read_json('{day1}', format='newline_delimited')) "
                   f"TO '{day2}' (FORMAT json)")  # fmt: skip
    ingest(hour_spec(day1), deep_storage=root / "deep", metadata=root / "meta.db")
    ingest(hour_spec(day2), deep_storage=root / "deep-rt", metadata=root / "meta-rt.db")
    base = f"/strata-cache-{uuid.uuid4().hex[:8]}"
    common = ["--zk", zk_hosts, "--zk-base", base, "--poll-period", "1"]
    historicals = [
        StrataProcess("historical", [*common, "--deep-storage", str(root / "deep"), "--metadata", str(root / "meta.db"),
                                     "--replicas", "1", "--segment-cache", str(root / f"cache{i}")],
                      root / f"hist{i}.log")
        for i in range(2)
    ]  # fmt: skip
    realtime = StrataProcess("historical", [*common, "--deep-storage", str(root / "deep-rt"),
                                            "--metadata", str(root / "meta-rt.db"), "--replicas", "3",
                                            "--segment-cache", str(root / "cache-rt"), "--server-type", "realtime"],
                             root / "realtime.log")  # fmt: skip
    started: list[StrataProcess] = []
    try:
        for node in [*historicals, realtime]:
            started.append(node.start())
        yield {"zk": zk_hosts, "base": base, "root": root, "historicals": historicals, "realtime": realtime,
               "day1": day1, "day2": day2, "started": started}  # fmt: skip
    finally:
        for p in reversed(started):
            p.stop()


def start_broker(
    cluster: dict[str, Any], name: str, *cache_args: str, result_cache: str = "off"
) -> StrataProcess:
    """A broker; the whole-answer cache is off unless asked for, so the per-segment cache is what is seen."""
    args = ["--zk", cluster["zk"], "--zk-base", cluster["base"], *cache_args, "--result-cache", result_cache]
    broker = StrataProcess("broker", args,
                           cluster["root"] / f"{name}.log").start()  # fmt: skip
    cluster["started"].append(broker)
    wait_until(
        lambda: segments_seen(broker, DAY1) == 24 and segments_seen(broker, DAY2) == 24, "all segments"
    )
    return broker


def historical_queries(cluster: dict[str, Any]) -> float:
    return sum(node_queries(h) for h in cluster["historicals"])


def test_two_brokers_share_memcached_and_the_hybrid_promotes_to_memory(
    cluster: dict[str, Any], memcached_server: MemcachedServer
) -> None:
    want = hourly_added(cluster["day1"])
    plain = start_broker(
        cluster, "broker-mc", "--cache", "memcached", "--memcached", memcached_server.address
    )
    hybrid = start_broker(
        cluster, "broker-hybrid", "--cache", "hybrid", "--memcached", memcached_server.address
    )
    misses = cache_status(plain)["backend"]["misses"]
    assert as_pairs(post(plain, timeseries(DAY1))) == want
    assert cache_status(plain)["backend"]["misses"] == misses + 24
    before, levels = historical_queries(cluster), cache_status(hybrid)["levels"]
    assert as_pairs(post(hybrid, timeseries(DAY1))) == want  # the other broker's entries, from memcached
    assert historical_queries(cluster) == before
    after = cache_status(hybrid)["levels"]
    assert after["l2"]["hits"] == levels["l2"]["hits"] + 24 and after["l1"]["hits"] == levels["l1"]["hits"]
    assert as_pairs(post(hybrid, timeseries(DAY1))) == want  # now from its own memory
    assert historical_queries(cluster) == before
    final = cache_status(hybrid)["levels"]
    assert final["l1"]["hits"] == after["l1"]["hits"] + 24 and final["l2"]["hits"] == after["l2"]["hits"]


def test_a_query_spanning_realtime_and_historical_caches_only_the_historical_part(
    cluster: dict[str, Any],
) -> None:
    want = hourly_added(cluster["day1"]) + hourly_added(cluster["day2"])
    broker = start_broker(cluster, "broker-lru", "--cache", "lru")
    span = "2015-09-12/2015-09-14"
    entries = cache_status(broker)["backend"]["entries"]
    assert as_pairs(post(broker, timeseries(span))) == want
    hist, rt = historical_queries(cluster), node_queries(cluster["realtime"])
    assert as_pairs(post(broker, timeseries(span))) == want
    assert historical_queries(cluster) == hist  # the historical half came from the cache
    assert node_queries(cluster["realtime"]) == rt + 1  # the realtime half was asked again
    assert cache_status(broker)["backend"]["entries"] == entries + 24  # 48 segments read, 24 cached


def test_memcached_dying_mid_run_costs_speed_not_answers(cluster: dict[str, Any]) -> None:
    want = hourly_added(cluster["day1"])
    server = MemcachedServer(port=free_port()).start()
    try:
        broker = start_broker(
            cluster, "broker-mc-dies", "--cache", "memcached", "--memcached", server.address
        )
        post(broker, timeseries(DAY1))
        server.stop()
        for _ in range(3):
            assert as_pairs(post(broker, timeseries(DAY1))) == want
        assert cache_status(broker)["backend"]["errors"] + cache_status(broker)["backend"]["timeouts"] > 0
        server.start()  # same port, empty

        def caching_again() -> bool:
            before = historical_queries(cluster)
            assert as_pairs(post(broker, timeseries(DAY1))) == want
            return historical_queries(cluster) == before

        wait_until(caching_again, "the broker to use memcached again", timeout=30)
    finally:
        server.stop()


def test_a_new_version_replaces_a_cached_segment(cluster: dict[str, Any]) -> None:
    root = cluster["root"]
    first, second = root / "v1.json", root / "v2.json"
    for path, channel in ((first, "#en.wikipedia"), (second, "#de.wikipedia")):
        duckdb.execute(f"COPY (SELECT * FROM read_json('{cluster['day1']}', format='newline_delimited') "
                       f"WHERE channel = '{channel}') TO '{path}' (FORMAT json)")  # fmt: skip
    spec = hour_spec(first, "versions")
    spec["spec"]["dataSchema"]["granularitySpec"]["segmentGranularity"] = "day"
    ingest(spec, deep_storage=root / "deep", metadata=root / "meta.db")
    broker = start_broker(cluster, "broker-versions", "--cache", "lru", result_cache="on")
    wait_until(lambda: segments_seen(broker, DAY1, "versions") == 1, "the first version")
    query = timeseries(DAY1, "versions")
    query["granularity"] = "all"
    (cold,) = post(broker, query)
    (warm,) = post(broker, query)
    old_total, new_total = (rows("SELECT sum(added) FROM RAW", p)[0][0] for p in (first, second))
    assert cold["result"]["added"] == warm["result"]["added"] == old_total
    spec["spec"]["ioConfig"]["inputSource"]["filter"] = second.name
    ingest(spec, deep_storage=root / "deep", metadata=root / "meta.db")  # overwrite: a newer version

    def answer() -> int:
        (result,) = post(broker, query)
        total: int = result["result"]["added"]
        assert total in (old_total, new_total), "never a mix or a stale partial of both"
        return total

    wait_until(lambda: answer() == new_total, "the new version", timeout=60)
    for _ in range(3):
        assert answer() == new_total
    assert json.dumps(cache_status(broker))  # still healthy


def test_fifty_identical_cold_queries_reach_each_historical_once(
    cluster: dict[str, Any], memcached_server: MemcachedServer
) -> None:
    from concurrent.futures import ThreadPoolExecutor

    want = hourly_added(cluster["day1"])
    broker = start_broker(
        cluster, "broker-burst", "--cache", "memcached", "--memcached", memcached_server.address
    )
    body = timeseries(DAY1)
    # a filter that keeps every row: the same answer, but a query no other test has cached
    body["filter"] = {
        "type": "not",
        "field": {"type": "selector", "dimension": "page", "value": "no such page"},
    }
    before = historical_queries(cluster)
    with ThreadPoolExecutor(50) as pool:
        answers = list(pool.map(lambda _: as_pairs(post(broker, body)), range(50)))
    assert answers == [want] * 50
    assert historical_queries(cluster) - before <= len(cluster["historicals"])  # one request per node
    assert cache_status(broker)["query"]["shared"] + cache_status(broker)["query"]["hits"] >= 49 * 24


def test_whole_answers_are_reused_while_the_segments_stay_the_same(cluster: dict[str, Any]) -> None:
    broker = start_broker(cluster, "broker-results", "--cache", "lru", result_cache="on")
    want = hourly_added(cluster["day1"])
    body = timeseries(DAY1)
    body["postAggregations"] = [{"type": "arithmetic", "name": "twice", "fn": "*",
                                 "fields": [{"type": "fieldAccess", "fieldName": "added"},
                                            {"type": "constant", "value": 2}]}]  # fmt: skip
    first = httpx.post(f"{broker.url}/druid/v2/", json=body, timeout=60)
    assert as_pairs(first.json()) == want and all(r["result"]["twice"] == 2 * r["result"]["added"]
                                                  for r in first.json())  # fmt: skip
    etag = first.headers["ETag"]
    before, hits = historical_queries(cluster), cache_status(broker)["resultLevel"]["hits"]
    body["context"]["queryId"] = "another-id"
    again = httpx.post(f"{broker.url}/druid/v2/", json=body, timeout=60)
    assert again.content == first.content and again.headers["ETag"] == etag
    assert historical_queries(cluster) == before and cache_status(broker)["query"]["hits"] == 0
    assert cache_status(broker)["resultLevel"]["hits"] == hits + 1
    unchanged = httpx.post(f"{broker.url}/druid/v2/", json=body, headers={"If-None-Match": etag}, timeout=60)
    assert unchanged.status_code == 304 and not unchanged.content
    body["postAggregations"][0]["fields"][1]["value"] = 3  # a different answer: its own entry
    thrice = httpx.post(f"{broker.url}/druid/v2/", json=body, timeout=60).json()
    assert [r["result"]["twice"] for r in thrice] == [3 * added for _, added in want]
    # a query reading a real-time segment is neither tagged nor stored whole
    span = httpx.post(f"{broker.url}/druid/v2/", json=timeseries("2015-09-12/2015-09-14"), timeout=60)
    assert span.status_code == 200 and "ETag" not in span.headers


def cache_args(kind: str, memcached: MemcachedServer) -> tuple[str, ...]:
    return ("--cache", kind) if kind == "lru" else ("--cache", kind, "--memcached", memcached.address)


@pytest.mark.parametrize("kind", ["lru", "hybrid", "memcached"])
def test_repeats_from_cached_partials_are_the_full_paths_answers(
    cluster: dict[str, Any], memcached_server: MemcachedServer, kind: str
) -> None:
    """A repeat whose every segment is cached takes the warm path (broker_service.segment_path),
    on every cache kind: the same bytes and headers as the full path's first answer, each
    partial read from the cache (the hybrid's from its L1, memcached's in one round trip)."""
    broker = start_broker(cluster, f"broker-segment-path-{kind}", *cache_args(kind, memcached_server))
    want = hourly_added(cluster["day1"])
    body = timeseries(DAY1)
    del body["context"]["queryId"]
    body["aggregations"].append({"type": "count", "name": "rows"})  # keys of its own in memcached
    raw = json.dumps(body).encode()

    def ask(content: bytes = raw) -> httpx.Response:
        resp = httpx.post(f"{broker.url}/druid/v2/", content=content, timeout=60)
        assert resp.status_code == 200, resp.text
        return resp

    first = ask()  # the full path: fetches and caches every hour's partial
    assert as_pairs(first.json()) == want
    before, status = historical_queries(cluster), cache_status(broker)
    repeats = [ask() for _ in range(3)]
    assert historical_queries(cluster) == before  # no data node asked
    after = cache_status(broker)
    assert after["query"]["hits"] == status["query"]["hits"] + 3 * 24  # each segment looked up each time
    assert after["query"]["warm"] == status["query"]["warm"] + 3  # each repeat on the warm path
    if kind == "hybrid":  # from its memory: memcached not asked
        assert after["levels"]["l2"]["hits"] == status["levels"]["l2"]["hits"]
        assert after["levels"]["l2"]["misses"] == status["levels"]["l2"]["misses"]
    varying = {"x-druid-query-id", "date"}
    for resp in repeats:
        assert resp.content == first.content
        assert [(k, v) for k, v in resp.headers.items() if k not in varying] == [
            (k, v) for k, v in first.headers.items() if k not in varying
        ]
    assert len({r.headers["X-Druid-Query-Id"] for r in [first, *repeats]}) == 4  # a fresh id each
    named = json.dumps({**body, "context": {"queryId": "dash-1"}}).encode()
    assert [ask(named).headers["X-Druid-Query-Id"] for _ in range(2)] == ["dash-1", "dash-1"]
    # a real-time segment is never cached: the full path answers, every time
    span = json.dumps(timeseries("2015-09-12/2015-09-14")).encode()
    assert ask(span).content == ask(span).content


def test_the_warm_path_reads_a_replaced_segment_anew(
    cluster: dict[str, Any], memcached_server: MemcachedServer
) -> None:
    """One day segment cached, then overwritten by a newer version: the warm path's repeats move
    to the new version's answer (its partial read from the cache per request), never a mix, on
    every cache kind."""
    root = cluster["root"]
    first, second = root / "hourly-v1.json", root / "hourly-v2.json"
    for path, channel in ((first, "#en.wikipedia"), (second, "#de.wikipedia")):
        duckdb.execute(f"COPY (SELECT * FROM read_json('{cluster['day1']}', format='newline_delimited') "
                       f"WHERE channel = '{channel}') TO '{path}' (FORMAT json)")  # fmt: skip
    spec = hour_spec(first, "hourly-versions")
    spec["spec"]["dataSchema"]["granularitySpec"]["segmentGranularity"] = "day"
    ingest(spec, deep_storage=root / "deep", metadata=root / "meta.db")
    brokers = [start_broker(cluster, f"broker-segment-versions-{kind}", *cache_args(kind, memcached_server))
               for kind in ("lru", "hybrid", "memcached")]  # fmt: skip
    for broker in brokers:
        wait_until(lambda b=broker: segments_seen(b, DAY1, "hourly-versions") == 1, "the first version")
    raw = json.dumps(
        {k: v for k, v in timeseries(DAY1, "hourly-versions").items() if k != "context"}
    ).encode()
    old, new = hourly_added(first), hourly_added(second)

    def answer(broker: StrataProcess) -> list[tuple[str, int]]:
        resp = httpx.post(f"{broker.url}/druid/v2/", content=raw, timeout=60)
        assert resp.status_code == 200, resp.text
        pairs = as_pairs(resp.json())
        assert pairs in (old, new), "never a mix or a stale partial of both"
        return pairs

    for broker in brokers:
        warm = cache_status(broker)["query"]["warm"]
        assert [answer(broker) for _ in range(3)] == [old] * 3  # the full path, then the warm path
        assert cache_status(broker)["query"]["warm"] == warm + 2
    spec["spec"]["ioConfig"]["inputSource"]["filter"] = second.name
    ingest(spec, deep_storage=root / "deep", metadata=root / "meta.db")  # overwrite: a newer version
    for broker in brokers:
        wait_until(lambda b=broker: answer(b) == new, "the new version", timeout=60)
        warm = cache_status(broker)["query"]["warm"]
        assert [answer(broker) for _ in range(3)] == [new] * 3
        assert cache_status(broker)["query"]["warm"] == warm + 3
