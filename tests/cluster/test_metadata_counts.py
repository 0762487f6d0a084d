"""Counts the broker answers from announced row counts, through real processes.

ZooKeeper, two historicals and a broker on loopback; daily segments in several partitions, one
day overwritten by a newer version. Every count is checked against DuckDB over the rows that
should be visible, and the broker's metrics say whether a data node was asked: never for a count
over segments read whole, always when the intervals cut a segment's rows or a filter is set.
Each metadata answer must also be byte for byte the answer of the scatter path (forced by a
filter that keeps every row).
"""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from harness.processes import StrataProcess
from strata.ingestion.api import ingest
from tests.cluster.cluster_kit import cluster, query, raw, synthetic_spec, wait_settled, write_rows
from timeline import format_instant

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

DS = "counted"
ETERNITY = "-146136543-09-08T08:23:32.096Z/146140482-04-24T15:36:27.903Z"
DAY1 = datetime(2024, 3, 1, tzinfo=UTC)
KEEP_ALL = {"type": "not", "field": {"type": "selector", "dimension": "k", "value": "never-a-value"}}


def _rows(rng: random.Random, days: range, n: int) -> list[dict[str, Any]]:
    out = []
    for _ in range(n):
        at = DAY1 + timedelta(days=rng.choice(days), milliseconds=rng.randrange(86_400_000))
        out.append({"ts": at.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
                    "k": rng.choice("abc"), "n": rng.randrange(100)})  # fmt: skip
    return out


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory, zk_hosts: str) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("metadata_counts")
    rng = random.Random(16)
    first = _rows(rng, range(3), 2400)
    second = _rows(rng, range(1, 2), 300)  # day two again: a newer version replaces it
    stores: dict[str, Any] = {"deep_storage": root / "deep", "metadata": root / "meta.db"}
    partitions = {"type": "dynamic", "maxRowsPerSegment": 500}
    ingest(
        synthetic_spec(DS, write_rows(root / "in1" / "rows.json", first), "day", partitions=partitions),
        **stores,
    )
    ingest(
        synthetic_spec(DS, write_rows(root / "in2" / "rows.json", second), "day", partitions=partitions),
        **stores,
    )
    day2 = (DAY1 + timedelta(days=1)).date().isoformat()
    visible = [r for r in first if not r["ts"].startswith(day2)] + second
    with cluster(root, zk_hosts, f"/strata-counts-{uuid.uuid4().hex[:8]}") as nodes:
        wait_settled(nodes.broker, root / "meta.db", nodes.historicals)
        yield {"broker": nodes.broker, "rows": write_rows(root / "visible.json", visible)}


def _metrics(broker: StrataProcess) -> tuple[float, float]:
    """(data node requests so far, segments counted from announced row counts so far)."""
    text = httpx.get(f"{broker.url}/metrics", timeout=10).text
    requests = counted = 0.0
    for line in text.splitlines():
        if line.startswith("strata_broker_node_request_seconds_count"):
            requests += float(line.rsplit(" ", 1)[1])
        elif line.startswith("strata_broker_segments_from_metadata_total"):
            counted += float(line.rsplit(" ", 1)[1])
    return requests, counted


def _count(broker: StrataProcess, intervals: list[str], **extra: Any) -> httpx.Response:
    body = {"queryType": "timeseries", "dataSource": DS, "intervals": intervals, "granularity": "all",
            "aggregations": [{"type": "count", "name": "rows"}]}  # fmt: skip
    body.update(extra)
    resp = query(broker, body)
    assert resp.status_code == 200, resp.text
    return resp


def _want(rows: Path, lo: str, hi: str, where: str = "TRUE") -> list[dict[str, Any]]:
    """Druid's answer by DuckDB: the count, stamped with the first matching row's time."""
    ((count, first),) = raw(f"SELECT count(*), epoch_ms(min(ts::TIMESTAMP)) FROM RAW WHERE {where} AND "
                            f"ts::TIMESTAMP >= '{lo}'::TIMESTAMP AND ts::TIMESTAMP < '{hi}'::TIMESTAMP", rows)  # fmt: skip
    return [] if count == 0 else [{"timestamp": format_instant(first), "result": {"rows": count}}]


def test_counts_over_whole_segments_ask_no_data_node(env: dict[str, Any]) -> None:
    broker, rows = env["broker"], env["rows"]
    whole = ["2024-03-01/2024-03-04", ETERNITY, "2024-02-01/2024-04-01"]
    for interval in whole:
        before = _metrics(broker)
        resp = _count(broker, [interval], context={"useCache": False})
        after = _metrics(broker)
        lo, hi = ("1970-01-01", "3000-01-01") if interval == ETERNITY else interval.split("/")
        assert resp.json() == _want(rows, lo, hi)
        assert after[0] == before[0], "a data node was asked"
        assert after[1] > before[1]


@pytest.mark.parametrize(
    "intervals, where",
    [
        (["2024-03-01T06:00:00Z/2024-03-03T18:00:00Z"], "TRUE"),  # cuts the first and last days' rows
        (["2024-03-02T00:00:00Z/2024-03-02T00:00:00.001Z"], "TRUE"),  # one millisecond, likely empty
        ([ETERNITY], "k = 'a'"),
    ],
)
def test_counts_over_part_of_a_segment_or_filtered_ask_the_data_nodes(
    env: dict[str, Any], intervals: list[str], where: str
) -> None:
    broker, rows = env["broker"], env["rows"]
    before = _metrics(broker)
    extra = {} if where == "TRUE" else {"filter": {"type": "selector", "dimension": "k", "value": "a"}}
    resp = _count(broker, intervals, context={"useCache": False}, **extra)
    after = _metrics(broker)
    lo, hi = ("1970-01-01", "3000-01-01") if intervals == [ETERNITY] else intervals[0].split("/")
    want = _want(rows, lo.rstrip("Z"), hi.rstrip("Z"), where)
    # the count only: a cut segment's row is stamped with the interval start (the scatter path's
    # rule), and `all` over segments with no matching row is one row of zero, as Druid's
    assert [r["result"] for r in resp.json()] == ([r["result"] for r in want] or [{"rows": 0}])
    assert after[0] > before[0], "the data nodes were not asked"


@pytest.mark.parametrize(
    "extra",
    [
        {},
        {"context": {"useCache": False, "populateCache": False}},
        {"context": {"finalize": False}},
        {"context": {"skipEmptyBuckets": True}},
        {"descending": True, "context": {"timestampResultField": "t"}},
        {"postAggregations": [{"type": "arithmetic", "name": "half", "fn": "/",
                               "fields": [{"type": "fieldAccess", "fieldName": "rows"},
                                          {"type": "constant", "value": 2}]}]},
        {"intervals": ["2030-01-01/2031-01-01"]},  # no segment at all
        {"aggregations": [{"type": "longMin", "name": "first", "fieldName": "__time"},
                          {"type": "doubleMax", "name": "last", "fieldName": "__time"},
                          {"type": "count", "name": "rows"}]},
    ],
)  # fmt: skip
def test_metadata_answers_are_the_scatter_paths_byte_for_byte(
    env: dict[str, Any], extra: dict[str, Any]
) -> None:
    broker, extra = env["broker"], dict(extra)
    intervals = extra.pop("intervals", [ETERNITY])
    ours = _count(broker, intervals, **extra)
    theirs = _count(broker, intervals, filter=KEEP_ALL, **extra)
    assert ours.content == theirs.content
    context = json.loads(ours.headers.get("X-Druid-Response-Context", "{}"))
    assert context == json.loads(theirs.headers.get("X-Druid-Response-Context", "{}"))


def test_first_and_last_row_times_come_from_metadata_too(env: dict[str, Any]) -> None:
    broker, rows = env["broker"], env["rows"]
    aggs = [{"type": "longMin", "name": "first", "fieldName": "__time"},
            {"type": "longMax", "name": "last", "fieldName": "__time"}]  # fmt: skip
    before = _metrics(broker)
    resp = _count(broker, [ETERNITY], aggregations=aggs)
    after = _metrics(broker)
    ((first, last),) = raw("SELECT epoch_ms(min(ts::TIMESTAMP)), epoch_ms(max(ts::TIMESTAMP)) FROM RAW", rows)
    assert resp.json() == [{"timestamp": format_instant(first), "result": {"first": first, "last": last}}]
    assert after[0] == before[0] and after[1] > before[1]


@pytest.mark.parametrize("bound", [None, "minTime", "maxTime"])
def test_time_boundary_comes_from_metadata_and_matches_the_scan(
    env: dict[str, Any], bound: str | None
) -> None:
    broker, rows = env["broker"], env["rows"]
    body: dict[str, Any] = {
        "queryType": "timeBoundary",
        "dataSource": DS,
        **({"bound": bound} if bound else {}),
    }
    before = _metrics(broker)
    ours = query(broker, body)
    after = _metrics(broker)
    theirs = query(broker, {**body, "filter": KEEP_ALL})  # scanned on the historicals
    ((first, last),) = raw("SELECT epoch_ms(min(ts::TIMESTAMP)), epoch_ms(max(ts::TIMESTAMP)) FROM RAW", rows)
    lo, hi = format_instant(first), format_instant(last)
    result = {"minTime": lo, "maxTime": hi} if bound is None else {bound: lo if bound == "minTime" else hi}
    assert ours.json() == [{"timestamp": hi if bound == "maxTime" else lo, "result": result}]
    assert ours.content == theirs.content
    assert after[0] == before[0] and after[1] > before[1]


def test_datasource_metadata_comes_from_metadata(env: dict[str, Any]) -> None:
    broker, rows = env["broker"], env["rows"]
    before = _metrics(broker)
    resp = query(broker, {"queryType": "dataSourceMetadata", "dataSource": DS})
    after = _metrics(broker)
    ((last,),) = raw("SELECT epoch_ms(max(ts::TIMESTAMP)) FROM RAW", rows)
    assert resp.json() == [
        {"timestamp": format_instant(last), "result": {"maxIngestedEventTime": format_instant(last)}}
    ]
    assert after[0] == before[0] and after[1] > before[1]


def test_sql_count_star_is_answered_from_metadata(env: dict[str, Any]) -> None:
    broker, rows = env["broker"], env["rows"]
    sql = {"query": f"SELECT COUNT(*) AS c FROM {DS}"}
    httpx.post(f"{broker.url}/druid/v2/sql/", json=sql, timeout=60)  # the catalog asks for columns once
    before = _metrics(broker)
    resp = httpx.post(f"{broker.url}/druid/v2/sql/", json=sql, timeout=60)
    after = _metrics(broker)
    assert resp.status_code == 200, resp.text
    ((count,),) = raw("SELECT count(*) FROM RAW", rows)
    assert resp.json() == [{"c": count}]
    assert after[0] == before[0] and after[1] > before[1]


def test_sys_segments_num_rows_is_each_visible_segments_row_count(env: dict[str, Any]) -> None:
    """`sys.segments.num_rows` from the announced counts: per day, the visible rows DuckDB counts."""
    broker, rows = env["broker"], env["rows"]
    sql = {"query": f"SELECT \"start\", SUM(num_rows) AS n, COUNT(*) AS parts FROM sys.segments "
                    f"WHERE datasource = '{DS}' GROUP BY 1 ORDER BY 1"}  # fmt: skip
    resp = httpx.post(f"{broker.url}/druid/v2/sql/", json=sql, timeout=60)
    assert resp.status_code == 200, resp.text
    want = raw("SELECT strftime(ts::TIMESTAMP, '%Y-%m-%dT00:00:00.000Z'), count(*), "
               "ceil(count(*) / 500) FROM RAW GROUP BY 1 ORDER BY 1", rows)  # fmt: skip
    assert [(r["start"], r["n"], r["parts"]) for r in resp.json()] == [(d, n, int(p)) for d, n, p in want]
