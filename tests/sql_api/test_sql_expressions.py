"""SQL scalar expressions (virtual columns, expression filters, aggregated expressions) through a real
broker, each against the same question written by hand in DuckDB SQL over the raw rows."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.cluster.test_broker_cluster import cluster  # noqa: F401 - the module's cluster fixture
from tests.historical_query.wiki_http import RawRows

pytestmark = pytest.mark.integration

# (Druid SQL, the same question for DuckDB over `raw`: t is the row's timestamp, ms its epoch ms)
CASES = [
    (
        "SELECT UPPER(SUBSTRING(page, 1, 1)) AS f, COUNT(*) AS n FROM wikipedia GROUP BY 1",
        "SELECT upper(substring(page, 1, 1)) AS f, count(*) AS n FROM raw GROUP BY 1",
    ),
    (
        "SELECT channel || '/' || namespace AS cn, SUM(added - deleted) AS net FROM wikipedia "
        "WHERE countryName = 'France' GROUP BY channel || '/' || namespace",
        "SELECT channel || '/' || namespace AS cn, sum(added - deleted) AS net FROM raw "
        "WHERE countryName = 'France' GROUP BY 1",
    ),
    (
        "SELECT COUNT(*) AS n FROM wikipedia WHERE LOWER(channel) LIKE '#en%' AND CHAR_LENGTH(page) > 30",
        "SELECT count(*) AS n FROM raw WHERE lower(channel) LIKE '#en%' AND length(page) > 30",
    ),
    (
        "SELECT COALESCE(cityName, regionName, 'unknown') AS place, COUNT(*) AS n FROM wikipedia "
        "WHERE countryName = 'Italy' GROUP BY 1",
        "SELECT coalesce(cityName, regionName, 'unknown') AS place, count(*) AS n FROM raw "
        "WHERE countryName = 'Italy' GROUP BY 1",
    ),
    (
        "SELECT CASE WHEN added > 100 THEN 'big' WHEN added > 10 THEN 'medium' ELSE 'small' END AS size, "
        "COUNT(*) AS n, MAX(delta) AS hi FROM wikipedia GROUP BY 1",
        "SELECT CASE WHEN added > 100 THEN 'big' WHEN added > 10 THEN 'medium' ELSE 'small' END AS size, "
        "count(*) AS n, max(delta) AS hi FROM raw GROUP BY 1",
    ),
    (
        "SELECT TIME_FORMAT(__time, 'yyyy-MM-dd HH', 'America/Los_Angeles') AS h, SUM(added) AS a "
        "FROM wikipedia GROUP BY 1",
        "SELECT strftime(timezone('America/Los_Angeles', t::TIMESTAMPTZ), '%Y-%m-%d %H') AS h, sum(added) AS a "
        "FROM raw GROUP BY 1",
    ),
    (
        "SELECT TIME_EXTRACT(__time, 'MINUTE') AS m, COUNT(*) AS n FROM wikipedia WHERE channel = '#fr.wikipedia' "
        "GROUP BY 1",
        "SELECT minute(t) AS m, count(*) AS n FROM raw WHERE channel = '#fr.wikipedia' GROUP BY 1",
    ),
    (
        "SELECT SUM(CASE WHEN isRobot = 'true' THEN 1 ELSE 0 END) AS robots, "
        "SUM(ABS(delta)) AS churn, AVG(CAST(added AS DOUBLE) * 2) AS a2 FROM wikipedia",
        "SELECT sum(CASE WHEN isRobot = 'true' THEN 1 ELSE 0 END) AS robots, sum(abs(delta)) AS churn, "
        "avg(added * 2.0) AS a2 FROM raw",
    ),
    (
        "SELECT page, STRPOS(page, ':') AS colon, CHAR_LENGTH(page) AS len FROM wikipedia "
        "WHERE TIME_EXTRACT(__time, 'HOUR') = 3 AND page LIKE 'User talk:%' AND delta < -100",
        "SELECT page, strpos(page, ':') AS colon, length(page) AS len FROM raw "
        "WHERE hour(t) = 3 AND page LIKE 'User talk:%' AND delta < -100",
    ),
    (
        "SELECT TIME_FLOOR(__time, 'PT6H') AS b, channel, COUNT(*) AS n FROM wikipedia "
        "WHERE channel IN ('#de.wikipedia', '#ja.wikipedia') GROUP BY 1, 2",
        "SELECT strftime(time_bucket(INTERVAL 6 HOUR, t), '%Y-%m-%dT%H:%M:%S.000Z') AS b, channel, count(*) AS n "
        "FROM raw WHERE channel IN ('#de.wikipedia', '#ja.wikipedia') GROUP BY 1, 2",
    ),
    (
        "SELECT NULLIF(countryIsoCode, 'US') AS c, COUNT(*) AS n FROM wikipedia WHERE countryIsoCode IN ('US', 'GB') "
        "GROUP BY 1",
        "SELECT nullif(countryIsoCode, 'US') AS c, count(*) AS n FROM raw WHERE countryIsoCode IN ('US', 'GB') "
        "GROUP BY 1",
    ),
    (
        "SELECT COUNT(*) FILTER (WHERE UPPER(namespace) = 'MAIN') AS main, COUNT(DISTINCT channel) AS ch "
        "FROM wikipedia WHERE NOT (added + deleted < 5)",
        "SELECT count(*) FILTER (WHERE upper(namespace) = 'MAIN') AS main, count(DISTINCT channel) AS ch "
        "FROM raw WHERE NOT (added + deleted < 5)",
    ),
    (
        "SELECT channel, ROUND(CAST(SUM(added) AS DOUBLE) / COUNT(*), 2) AS mean, UPPER(channel) AS up, "
        "'edits' AS label, COUNT(*) * 2 + 1 AS odd FROM wikipedia WHERE countryName = 'Japan' GROUP BY channel",
        "SELECT channel, round(CAST(sum(added) AS DOUBLE) / count(*), 2) AS mean, upper(channel) AS up, "
        "'edits' AS label, count(*) * 2 + 1 AS odd FROM raw WHERE countryName = 'Japan' GROUP BY channel",
    ),
    (
        "SELECT CASE WHEN COUNT(*) > 100 THEN 'busy' ELSE 'quiet' END AS load, namespace FROM wikipedia "
        "GROUP BY namespace",
        "SELECT CASE WHEN count(*) > 100 THEN 'busy' ELSE 'quiet' END AS load, namespace FROM raw GROUP BY namespace",
    ),
    (  # a string compared with a TIMESTAMP is a TIMESTAMP (qaUnnest mv_sql_scalar_datetime_funcs.std, case 19)
        "SELECT COUNT(*) AS n FROM wikipedia WHERE MILLIS_TO_TIMESTAMP(added) <> '1970-01-01T00:00:00.000Z'",
        "SELECT count(*) AS n FROM raw WHERE added <> 0",
    ),
]


def canon(rows: list[dict[str, Any]]) -> list[str]:
    def norm(v: Any) -> Any:
        return round(v, 6) if isinstance(v, float) else v

    return sorted(json.dumps({k: norm(v) for k, v in r.items()}, sort_keys=True, default=str) for r in rows)


@pytest.mark.parametrize(("druid", "duck"), CASES)
def test_expression_sql_equals_duckdb(
    cluster: dict[str, Any],  # noqa: F811
    wikipedia_sample: Path,
    druid: str,
    duck: str,
) -> None:
    assert_same_rows(cluster["broker"], wikipedia_sample, druid, duck)


def assert_same_rows(
    broker: Any, sample: Path, druid: str, duck: str, context: dict[str, Any] | None = None
) -> None:
    """The broker's answer to `druid` has the rows DuckDB gives for `duck` over the raw sample."""
    body = {"query": druid, "context": context or {}}
    resp = httpx.post(broker.url + "/druid/v2/sql", json=body, timeout=60)
    assert resp.status_code == 200, resp.text
    cur = RawRows(sample).conn.execute(duck)
    names = [d[0] for d in cur.description]
    want = [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
    assert canon(resp.json()) == canon(want)


def test_expressions_plan_to_virtual_columns(cluster: dict[str, Any]) -> None:  # noqa: F811
    query = "EXPLAIN PLAN FOR SELECT UPPER(channel) AS c, SUM(added * 2) AS s FROM wikipedia GROUP BY 1"
    resp = httpx.post(cluster["broker"].url + "/druid/v2/sql", json={"query": query}, timeout=60)
    assert resp.status_code == 200, resp.text
    native = json.loads(resp.json()[0]["PLAN"])[0]["query"]
    assert [v["expression"] for v in native["virtualColumns"]] == ['upper("channel")', '("added" * 2)']
    assert native["queryType"] == "groupBy"
    assert native["dimensions"][0]["dimension"] == "v0"
