"""The SQL Druid's web console sends (the shapes of its explore views, as Druid's own quidem files
`quidem-ut/.../kttm_*.iq` record them: `t."col"`, `CAST(t."__time" AS TIMESTAMP)`, `GROUP BY ()`,
`COUNT(*) FILTER (WHERE ...)`, `TIME_FLOOR(..., 'PT1H', NULL, 'Etc/UTC')`), asked of a real broker
over the wikipedia sample and compared with DuckDB over the raw rows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.cluster.test_broker_cluster import cluster  # noqa: F401 - the module's cluster fixture
from tests.sql_api.test_sql_expressions import assert_same_rows

pytestmark = pytest.mark.integration

DAY = (
    "(TIMESTAMP '2015-09-12 00:00:00'<=CAST(t.\"__time\" AS TIMESTAMP) "
    "AND CAST(t.\"__time\" AS TIMESTAMP)<TIMESTAMP '2015-09-12 12:00:00')"
)
RAW_DAY = "t >= '2015-09-12 00:00:00' AND t < '2015-09-12 12:00:00'"
ISO = "strftime({}, '%Y-%m-%dT%H:%M:%S.%g') || 'Z'"

CONSOLE = [
    (
        'SELECT\nMAX(CAST(t."__time" AS TIMESTAMP)) AS "__VALUE__"\nFROM "wikipedia" AS t\nGROUP BY ()',
        f"SELECT {ISO.format('max(t)')} AS __VALUE__ FROM raw",
    ),
    (
        f'SELECT\n(COUNT(*)) AS "__VALUE__"\nFROM "wikipedia" AS t\nWHERE {DAY}\nGROUP BY ()',
        f"SELECT count(*) AS __VALUE__ FROM raw WHERE {RAW_DAY}",
    ),
    (
        f'SELECT\nCAST(t."channel" AS VARCHAR) AS "channel",\n(COUNT(*)) AS "count"\nFROM "wikipedia" AS t\n'
        f'WHERE {DAY}\nGROUP BY 1\nORDER BY "count" DESC\nLIMIT 1000',
        f"SELECT channel, count(*) AS count FROM raw WHERE {RAW_DAY} GROUP BY 1",
    ),
    (
        f'SELECT\n(COUNT(*)) AS "v0",\n(COUNT(*) FILTER (WHERE (CAST(t."channel" AS VARCHAR)=\'#en.wikipedia\'))) '
        f'AS "v1"\nFROM "wikipedia" AS t\nWHERE {DAY}\nGROUP BY ()',
        f"SELECT count(*) AS v0, count(*) FILTER (WHERE channel = '#en.wikipedia') AS v1 FROM raw "
        f"WHERE {RAW_DAY}",
    ),
    (
        f'SELECT\nCAST(t."countryName" AS VARCHAR) AS "Country",\nCAST(t."isRobot" AS VARCHAR) AS "Robot",\n'
        f'(COUNT(*)) AS "count"\nFROM "wikipedia" AS t\nWHERE (({DAY} AND (CAST(t."channel" AS VARCHAR)='
        f'\'#en.wikipedia\')) AND (CAST(t."countryName" AS VARCHAR) IS NULL OR CAST(t."countryName" AS VARCHAR) '
        "IN ('United States','Canada')))\nGROUP BY 1,2",
        "SELECT countryName AS Country, isRobot AS Robot, count(*) AS count FROM raw "
        f"WHERE {RAW_DAY} AND channel = '#en.wikipedia' "
        "AND (countryName IS NULL OR countryName IN ('United States', 'Canada')) GROUP BY 1, 2",
    ),
    (
        "SELECT\nTIME_FLOOR(CAST(t.\"__time\" AS TIMESTAMP), 'PT1H', NULL, 'Etc/UTC') AS \"__time\",\n"
        f'SUM(t."added") AS "sum_added"\nFROM "wikipedia" AS t\nWHERE {DAY}\nGROUP BY 1\nORDER BY 1 ASC',
        f"SELECT {ISO.format('time_bucket(INTERVAL 1 HOUR, t)')} AS __time, sum(added) AS sum_added FROM raw "
        f"WHERE {RAW_DAY} GROUP BY 1",
    ),
]


@pytest.mark.parametrize(("druid", "duck"), CONSOLE)
def test_web_console_statements_equal_duckdb(
    cluster: dict[str, Any],  # noqa: F811
    wikipedia_sample: Path,
    druid: str,
    duck: str,
) -> None:
    assert_same_rows(cluster["broker"], wikipedia_sample, druid, duck)
