"""Statements no single native query answers (joins, windows, VALUES, set operations, GROUP BY (),
qualified names, SET prefixes, system tables), and the defects of the shape-matching planner
(issue 26), each answered by a real broker and compared with DuckDB over the raw sample rows."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
import pytest

from tests.cluster.test_broker_cluster import cluster  # noqa: F401 - the module's cluster fixture
from tests.sql_api.test_sql_expressions import assert_same_rows

pytestmark = pytest.mark.integration

ISO = "strftime({}, '%Y-%m-%dT%H:%M:%S.%g') || 'Z'"  # Druid's UTC instant, as DuckDB writes it

RELATIONAL = [
    (  # the silent wrong answer: grouped by the raw timestamp, printed as the year -146136543
        "SELECT CAST(__time AS DATE) AS d, COUNT(*) AS n FROM wikipedia GROUP BY 1",
        "SELECT strftime(t::DATE, '%Y-%m-%dT00:00:00.000Z') AS d, count(*) AS n FROM raw GROUP BY 1",
    ),
    (
        "SELECT MIN(__time) AS lo, MAX(__time) AS hi FROM wikipedia",
        f"SELECT {ISO.format('min(t)')} AS lo, {ISO.format('max(t)')} AS hi FROM raw",
    ),
    (
        "SELECT COUNT(*) AS n FROM wikipedia "
        "WHERE (TIME_IN_INTERVAL(__time, '2015-09-12T01:00/PT1H') AND channel = '#en.wikipedia')",
        "SELECT count(*) AS n FROM raw WHERE t >= '2015-09-12 01:00' AND t < '2015-09-12 02:00' "
        "AND channel = '#en.wikipedia'",
    ),
    (  # sorted above a scan that is a subquery of its own (Druid refuses the table's scan so sorted)
        "SELECT page FROM (SELECT __time, page FROM wikipedia WHERE channel = '#de.wikipedia' LIMIT 50000) "
        "ORDER BY __time DESC, page LIMIT 3",
        "SELECT page FROM raw WHERE channel = '#de.wikipedia' ORDER BY t DESC, page LIMIT 3",
    ),
    (  # found by the reference generator: the native scan wrote the whole match, not group 1
        "SELECT page, REGEXP_EXTRACT(page, '([a-z]+)\\.', 1) AS r FROM wikipedia "
        "WHERE page LIKE '%t.%' AND channel = '#en.wikipedia' ORDER BY __time LIMIT 20",
        "SELECT page, regexp_extract(page, '([a-z]+)\\.', 1) AS r FROM raw "
        "WHERE page LIKE '%t.%' AND channel = '#en.wikipedia' ORDER BY t LIMIT 20",
    ),
    (
        'SELECT t."channel", COUNT(*) AS n FROM wikipedia AS t GROUP BY t."channel"',
        "SELECT channel, count(*) AS n FROM raw GROUP BY channel",
    ),
    (
        "SELECT COUNT(*) AS n, SUM(added) AS a FROM wikipedia GROUP BY ()",
        "SELECT count(*) AS n, sum(added) AS a FROM raw",
    ),
    (
        "SELECT channel, RANK() OVER (ORDER BY COUNT(*) DESC) AS r FROM wikipedia GROUP BY channel",
        "SELECT channel, rank() OVER (ORDER BY count(*) DESC) AS r FROM raw GROUP BY channel",
    ),
    (  # integer division as Druid divides BIGINTs; nulls sort first ascending, as Druid orders them
        "SELECT countryName, SUM(added) / COUNT(*) AS mean, ROW_NUMBER() OVER (ORDER BY countryName) AS rn "
        "FROM wikipedia WHERE channel = '#it.wikipedia' GROUP BY countryName",
        "SELECT countryName, sum(added) // count(*) AS mean, "
        "row_number() OVER (ORDER BY countryName NULLS FIRST) AS rn "
        "FROM raw WHERE channel = '#it.wikipedia' GROUP BY countryName",
    ),
    (
        "SELECT channel, COUNT(*) AS n, SUM(COUNT(*)) OVER () AS total FROM wikipedia "
        "WHERE countryName IS NOT NULL GROUP BY channel",
        "SELECT channel, count(*) AS n, sum(count(*)) OVER () AS total FROM raw "
        "WHERE countryName IS NOT NULL GROUP BY channel",
    ),
    (
        "SELECT w.channel, w.page, ROW_NUMBER() OVER (PARTITION BY w.channel ORDER BY w.added DESC, w.page) "
        "AS rn FROM wikipedia w WHERE w.countryName = 'Italy' AND w.added > 500",
        "SELECT channel, page, row_number() OVER (PARTITION BY channel ORDER BY added DESC, page) AS rn "
        "FROM raw WHERE countryName = 'Italy' AND added > 500",
    ),
    (
        "SELECT a.channel, a.n, b.m FROM (SELECT channel, COUNT(*) AS n FROM wikipedia GROUP BY channel) a "
        "JOIN (SELECT channel, MAX(added) AS m FROM wikipedia WHERE isRobot = 'true' GROUP BY channel) b "
        "ON a.channel = b.channel",
        "SELECT a.channel, a.n, b.m FROM (SELECT channel, count(*) AS n FROM raw GROUP BY channel) a "
        "JOIN (SELECT channel, max(added) AS m FROM raw WHERE isRobot = 'true' GROUP BY channel) b "
        "ON a.channel = b.channel",
    ),
    (
        "SELECT c.countryName, COUNT(*) AS n FROM wikipedia c LEFT JOIN "
        "(SELECT countryName FROM wikipedia WHERE cityName = 'Rome' GROUP BY 1) r "
        "ON c.countryName = r.countryName WHERE r.countryName IS NULL AND c.countryName IS NOT NULL "
        "GROUP BY 1",
        "SELECT c.countryName, count(*) AS n FROM raw c LEFT JOIN "
        "(SELECT countryName FROM raw WHERE cityName = 'Rome' GROUP BY 1) r "
        "ON c.countryName = r.countryName WHERE r.countryName IS NULL AND c.countryName IS NOT NULL "
        "GROUP BY 1",
    ),
    (  # native subtotalsSpec, as Druid plans grouping sets
        "SELECT channel, isRobot, COUNT(*) AS n, SUM(added) AS a FROM wikipedia WHERE countryName = 'Italy' "
        "GROUP BY ROLLUP(channel, isRobot)",
        "SELECT channel, isRobot, count(*) AS n, sum(added) AS a FROM raw WHERE countryName = 'Italy' "
        "GROUP BY ROLLUP(channel, isRobot)",
    ),
    (
        "SELECT channel, isRobot, COUNT(*) AS n FROM wikipedia WHERE countryName = 'France' "
        "GROUP BY CUBE(channel, isRobot)",
        "SELECT channel, isRobot, count(*) AS n FROM raw WHERE countryName = 'France' "
        "GROUP BY CUBE(channel, isRobot)",
    ),
    (
        "SELECT channel, isRobot, MAX(delta) AS m FROM wikipedia WHERE countryName = 'Japan' "
        "GROUP BY GROUPING SETS ((channel, isRobot), (isRobot), ())",
        "SELECT channel, isRobot, max(delta) AS m FROM raw WHERE countryName = 'Japan' "
        "GROUP BY GROUPING SETS ((channel, isRobot), (isRobot), ())",
    ),
    (
        "SELECT x, y FROM (VALUES (1, 'a'), (2, 'b')) AS v(x, y)",
        "SELECT x, y FROM (VALUES (1, 'a'), (2, 'b')) AS v(x, y)",
    ),
    (
        "SELECT channel AS c FROM wikipedia WHERE countryName = 'Italy' "
        "UNION SELECT channel FROM wikipedia WHERE countryName = 'France'",
        "SELECT channel AS c FROM raw WHERE countryName = 'Italy' "
        "UNION SELECT channel FROM raw WHERE countryName = 'France'",
    ),
    (
        "SELECT channel FROM wikipedia WHERE countryName = 'Italy' "
        "EXCEPT SELECT channel FROM wikipedia WHERE countryName = 'France'",
        "SELECT channel FROM raw WHERE countryName = 'Italy' "
        "EXCEPT SELECT channel FROM raw WHERE countryName = 'France'",
    ),
    (
        "WITH top AS (SELECT page, COUNT(*) AS n FROM wikipedia GROUP BY page ORDER BY n DESC LIMIT 3) "
        "SELECT w.page, SUM(w.added) AS a FROM wikipedia w WHERE w.page IN (SELECT page FROM top) GROUP BY 1",
        "WITH top AS (SELECT page, count(*) AS n FROM raw GROUP BY page ORDER BY n DESC, page LIMIT 3) "
        "SELECT w.page, sum(w.added) AS a FROM raw w WHERE w.page IN (SELECT page FROM top) GROUP BY 1",
    ),
]


@pytest.mark.parametrize(("druid", "duck"), RELATIONAL)
def test_relational_statements_equal_duckdb(
    cluster: dict[str, Any],  # noqa: F811
    wikipedia_sample: Any,
    druid: str,
    duck: str,
) -> None:
    assert_same_rows(cluster["broker"], wikipedia_sample, druid, duck, {"useApproximateTopN": False})


def test_set_prefix_time_zone_and_timestamp_types(cluster: dict[str, Any]) -> None:  # noqa: F811
    """`SET sqlTimeZone = ...;` before the statement (Druid 31+) prints instants in that zone;
    MIN/MAX of __time are TIMESTAMP, not BIGINT."""
    resp = httpx.post(
        cluster["broker"].url + "/druid/v2/sql",
        json={
            "query": "SET sqlTimeZone = 'America/Los_Angeles'; SELECT MAX(__time) AS hi FROM wikipedia",
            "header": True,
            "sqlTypesHeader": True,
        },
        timeout=60,
    )
    assert resp.status_code == 200, resp.text
    header, row = resp.json()
    assert header == {"hi": {"sqlType": "TIMESTAMP"}}
    assert row == {"hi": "2015-09-12T16:59:59.200-07:00"}  # 23:59:59.200Z in the sample, 7 hours west


def test_system_tables_name_their_columns(cluster: dict[str, Any]) -> None:  # noqa: F811
    url = cluster["broker"].url + "/druid/v2/sql"
    deadline = time.monotonic() + 60  # alone, this test may run before the broker has seen a segment
    while not (
        segments := httpx.post(url, json={"query": "SELECT * FROM sys.segments LIMIT 1"}, timeout=60).json()
    ):
        assert time.monotonic() < deadline, "no segment announced within 60 s"
        time.sleep(0.5)
    assert {"segment_id", "datasource", "start", "end", "num_rows", "is_realtime"} <= set(segments[0])
    columns = httpx.post(
        url,
        json={"query": "SELECT * FROM INFORMATION_SCHEMA.COLUMNS WHERE TABLE_NAME = 'wikipedia'"},
        timeout=60,
    ).json()
    assert {"TABLE_SCHEMA", "TABLE_NAME", "COLUMN_NAME", "DATA_TYPE"} <= set(columns[0])
    assert not any(k.startswith("EXPR$") for k in columns[0])


def test_explain_shows_the_brokers_part(cluster: dict[str, Any]) -> None:  # noqa: F811
    resp = httpx.post(
        cluster["broker"].url + "/druid/v2/sql",
        json={
            "query": "EXPLAIN PLAN FOR SELECT channel, RANK() OVER (ORDER BY COUNT(*) DESC) AS r "
            "FROM wikipedia GROUP BY channel"
        },
        timeout=60,
    )
    assert resp.status_code == 200, resp.text
    plan = json.loads(resp.json()[0]["PLAN"])
    assert plan[0]["query"]["queryType"] == "groupBy"  # the grouping stays on the data nodes
    assert "RANK()" in plan[-1]["broker"]["statement"]


@pytest.mark.parametrize(
    "statement",
    [
        "SELECT channel, RANK() OVER (ORDER BY added) AS r FROM wikipedia",  # a scan for the broker
        "SELECT page, RANK() OVER (ORDER BY COUNT(*) DESC) AS r FROM wikipedia GROUP BY page",  # a groupBy
    ],
)
def test_max_subquery_rows_bounds_what_the_broker_computes_over(
    cluster: dict[str, Any],  # noqa: F811
    statement: str,
) -> None:
    """Rows handed to the broker's engine past `maxSubqueryRows` are a 400 naming the limit (the
    sample has 39,244 rows and over 20,000 pages), never an out-of-memory."""
    url = cluster["broker"].url + "/druid/v2/sql"
    resp = httpx.post(url, json={"query": statement, "context": {"maxSubqueryRows": 1000}}, timeout=60)
    assert resp.status_code == 400, resp.text
    assert resp.json()["category"] == "CAPACITY_EXCEEDED" and "maximum[1000]" in resp.json()["errorMessage"]
    assert httpx.post(url, json={"query": statement}, timeout=60).status_code == 200
