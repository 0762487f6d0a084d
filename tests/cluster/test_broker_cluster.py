"""A real cluster: ZooKeeper, two `strata historical` processes and `strata broker` processes.

Answers through the broker are checked against DuckDB over the raw wikipedia rows.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import duckdb
import httpx
import pytest

from harness.processes import StrataProcess
from tests.cluster.cluster_kit import WIKIPEDIA_HOURS as HOURS
from tests.cluster.cluster_kit import served_segments, wait_for_segments

pytestmark = pytest.mark.integration


def raw(sql: str, sample: Path) -> list[tuple[Any, ...]]:
    rel = f"read_json('{sample}', format='newline_delimited')"
    return duckdb.execute(sql.replace("RAW", rel)).fetchall()


def query(broker: StrataProcess, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{broker.url}/druid/v2/", json=body, timeout=60)


@pytest.fixture(scope="module")
def cluster(wikipedia_cluster: dict[str, Any]) -> dict[str, Any]:
    """The session's wikipedia cluster (tests/conftest.py), under the name these modules use."""
    return wikipedia_cluster


def test_scan_with_filter_through_the_broker(cluster: dict[str, Any], wikipedia_sample: Path) -> None:
    body = {"queryType": "scan", "dataSource": "wikipedia", "intervals": "2015-09-12/2015-09-13",
            "columns": ["page", "added"], "filter": {"type": "and", "fields": [
                {"type": "selector", "dimension": "channel", "value": "#en.wikipedia"},
                {"type": "bound", "dimension": "added", "lower": "100", "ordering": "numeric"}]}}  # fmt: skip
    resp = query(cluster["broker"], body)
    assert resp.status_code == 200, resp.text
    events = [e for batch in resp.json() for e in batch["events"]]
    (count, total), = raw("SELECT count(*), sum(added) FROM RAW WHERE channel = '#en.wikipedia' AND added >= 100",
                          wikipedia_sample)  # fmt: skip
    assert len(events) == count and sum(e["added"] for e in events) == total
    assert resp.headers["X-Druid-Query-Id"]


def test_time_boundary_and_segment_metadata(cluster: dict[str, Any], wikipedia_sample: Path) -> None:
    broker = cluster["broker"]
    (lo, hi, rows), = raw("SELECT strftime(min(time::TIMESTAMP), '%Y-%m-%dT%H:%M:%S.%gZ'), "
                          "strftime(max(time::TIMESTAMP), '%Y-%m-%dT%H:%M:%S.%gZ'), count(*) FROM RAW",
                          wikipedia_sample)  # fmt: skip
    tb = query(broker, {"queryType": "timeBoundary", "dataSource": "wikipedia"}).json()
    assert tb == [{"timestamp": lo, "result": {"minTime": lo, "maxTime": hi}}]
    meta = query(broker, {"queryType": "segmentMetadata", "dataSource": "wikipedia",
                          "intervals": ["2015-09-12/2015-09-13"], "merge": True}).json()  # fmt: skip
    assert len(meta) == 1 and meta[0]["numRows"] == rows


def test_http_discovery_gives_the_same_answers(cluster: dict[str, Any]) -> None:
    nodes = ",".join(h.address for h in cluster["historicals"])
    broker = StrataProcess(
        "broker", ["--discovery", "http", "--nodes", nodes], cluster["root"] / "broker-http.log"
    )
    broker.start()
    try:
        wait_for_segments(broker, HOURS)
        body = {"queryType": "scan", "dataSource": "wikipedia", "intervals": "2015-09-12/2015-09-13",
                "columns": ["user"], "filter": {"type": "like", "dimension": "page", "pattern": "%Talk%"}}  # fmt: skip
        zk_answer = query(cluster["broker"], body).json()
        http_answer = query(broker, body).json()
        flatten = lambda answer: sorted(e["user"] for b in answer for e in b["events"])  # noqa: E731
        assert flatten(http_answer) == flatten(zk_answer) and len(flatten(zk_answer)) > 0
    finally:
        broker.stop()


def test_malformed_queries_get_druid_errors_and_the_broker_keeps_serving(cluster: dict[str, Any]) -> None:
    broker = cluster["broker"]
    bad = httpx.post(f"{broker.url}/druid/v2/", content=b"{nope", timeout=10,
                     headers={"Content-Type": "application/json"})  # fmt: skip
    assert bad.status_code == 400 and bad.json()["error"] == "Json parse failed"
    unknown = query(broker, {"queryType": "nope", "dataSource": "wikipedia", "intervals": "2015/2016"})
    assert unknown.status_code == 400 and unknown.json()["errorMessage"]
    negative = query(
        broker, {"queryType": "scan", "dataSource": "wikipedia", "intervals": "2015/2016", "limit": -5}
    )
    assert negative.status_code == 400
    topn = {"queryType": "topN", "dataSource": "wikipedia", "intervals": "2015/2016", "granularity": "all",
            "dimension": "page", "metric": "c", "aggregations": [{"type": "count", "name": "c"}]}  # fmt: skip
    for threshold in ("ten", 10**30, [5]):  # wrong type; beyond Druid's int
        bad_field = query(broker, {**topn, "threshold": threshold})
        assert bad_field.status_code == 400 and bad_field.json()["error"] == "druidException", bad_field.text
    wrong_type = query(broker, {**topn, "threshold": 5, "aggregations": {"type": "count"}})
    assert wrong_type.status_code == 400 and "aggregations" in wrong_type.json()["errorMessage"]
    # an unknown datasource is not an error in Druid's native API: an empty answer
    nowhere = query(broker, {**topn, "threshold": 5, "dataSource": "no_such_datasource"})
    assert nowhere.status_code == 200 and nowhere.json() == []
    assert served_segments(broker) == HOURS


def test_losing_a_historical_never_gives_a_wrong_total(
    cluster: dict[str, Any], wikipedia_sample: Path
) -> None:
    """replicas=1: while the survivor takes over, answers are complete, an error, or flagged partial."""
    broker = cluster["broker"]
    ((rows,),) = raw("SELECT count(*) FROM RAW", wikipedia_sample)
    body = {"queryType": "segmentMetadata", "dataSource": "wikipedia", "intervals": ["2015-09-12/2015-09-13"],
            "merge": True, "analysisTypes": [], "context": {"returnPartialResults": True}}  # fmt: skip
    victim = cluster["historicals"][0]
    victim.kill()
    outcomes = {"complete": 0, "partial": 0, "error": 0}
    try:
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline:
            resp = query(broker, body)
            if resp.status_code != 200:
                assert resp.json()["error"]  # a Druid error body, never a silent wrong answer
                outcomes["error"] += 1
                continue
            missing = json.loads(resp.headers.get("X-Druid-Response-Context", "{}")).get(
                "missingSegments", []
            )
            total = sum(entry["numRows"] for entry in resp.json())
            if missing:
                assert total < rows
                outcomes["partial"] += 1
            else:
                assert total == rows, f"an unflagged answer must be complete ({outcomes})"
                outcomes["complete"] += 1
                if outcomes["complete"] >= 3:
                    break
            time.sleep(0.1)
        assert outcomes["complete"] >= 3, outcomes
        assert outcomes["partial"] > 0, outcomes  # the takeover window was really observed
    finally:
        victim.start()
        wait_for_segments(broker, HOURS)


def test_druid_tutorial_top_pages(cluster: dict[str, Any], wikipedia_sample: Path) -> None:
    body = {"queryType": "topN", "dataSource": "wikipedia", "intervals": ["2015-09-12/2015-09-13"],
            "granularity": "all", "dimension": "page", "metric": "count", "threshold": 10,
            "aggregations": [{"type": "count", "name": "count"}],
            # Druid publishes this answer over one DAY segment; over 24 hourly segments topN keeps
            # minTopNThreshold pages per segment and is approximate, so widen it to be exact here.
            "context": {"minTopNThreshold": 100000}}  # fmt: skip
    resp = query(cluster["broker"], body)
    assert resp.status_code == 200, resp.text
    (result,) = resp.json()
    # Druid's published answer: the top page and the timestamp of the first event
    assert result["timestamp"] == "2015-09-12T00:46:58.771Z"
    assert result["result"][0] == {"count": 33, "page": "Wikipedia:Vandalismusmeldung"}
    want = raw(
        "SELECT page, count(*) c FROM RAW GROUP BY page ORDER BY c DESC, page LIMIT 10", wikipedia_sample
    )
    assert [(r["page"], r["count"]) for r in result["result"]] == [tuple(w) for w in want]


def test_timeseries_and_groupby_through_the_broker(cluster: dict[str, Any], wikipedia_sample: Path) -> None:
    broker = cluster["broker"]
    ts = query(broker, {"queryType": "timeseries", "dataSource": "wikipedia", "granularity": "hour",
                        "intervals": ["2015-09-12/2015-09-13"],
                        "aggregations": [{"type": "longSum", "name": "added", "fieldName": "added"},
                                         {"type": "count", "name": "rows"}]}).json()  # fmt: skip
    want = raw("SELECT strftime(date_trunc('hour', time::TIMESTAMP), '%Y-%m-%dT%H:00:00.000Z'), sum(added), count(*) "
               "FROM RAW GROUP BY 1 ORDER BY 1", wikipedia_sample)  # fmt: skip
    assert [(r["timestamp"], r["result"]["added"], r["result"]["rows"]) for r in ts] == [
        tuple(w) for w in want
    ]
    gb = query(broker, {"queryType": "groupBy", "dataSource": "wikipedia", "granularity": "all",
                        "intervals": ["2015-09-12/2015-09-13"], "dimensions": ["channel"],
                        "aggregations": [{"type": "doubleSum", "name": "delta", "fieldName": "delta"}],
                        "limitSpec": {"type": "default", "limit": 5,
                                      "columns": [{"dimension": "delta", "direction": "descending"}]}}).json()  # fmt: skip
    want = raw(
        "SELECT channel, sum(delta)::DOUBLE d FROM RAW GROUP BY channel ORDER BY d DESC LIMIT 5",
        wikipedia_sample,
    )
    assert [(r["event"]["channel"], r["event"]["delta"]) for r in gb] == [tuple(w) for w in want]
    assert all(r["version"] == "v1" and r["timestamp"] == "2015-09-12T00:00:00.000Z" for r in gb)


def historical_queries(node: StrataProcess) -> float:
    text = httpx.get(f"{node.url}/metrics", timeout=10).text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("strata_historical_queries_total{"))  # fmt: skip


def test_lru_cache_answers_a_repeated_query_without_the_data_nodes(cluster: dict[str, Any]) -> None:
    """Repeated timeseries through a broker with --cache lru: same answer, no data-node request."""
    broker = StrataProcess("broker", ["--zk", cluster["historicals"][0].args[1], "--zk-base", cluster["base"],
                                      "--cache", "lru", "--cache-size", "100000000"],
                           cluster["root"] / "broker-cache.log").start()  # fmt: skip
    try:
        wait_for_segments(broker, HOURS)
        body = {"queryType": "timeseries", "dataSource": "wikipedia", "granularity": "hour",
                "intervals": ["2015-09-12/2015-09-13"],
                "aggregations": [{"type": "longSum", "name": "added", "fieldName": "added"}],
                "context": {"queryId": "cold"}}  # fmt: skip
        cold = query(broker, body).json()
        before = sum(historical_queries(h) for h in cluster["historicals"])
        body["context"] = {"queryId": "warm"}  # a different query id shares the cache entries
        warm = query(broker, body).json()
        after = sum(historical_queries(h) for h in cluster["historicals"])
        assert warm == cold and len(cold) == HOURS
        assert after == before
    finally:
        broker.stop()
