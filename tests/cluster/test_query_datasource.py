"""Druid's `query` dataSource through a real broker: the inner query runs on the data nodes, the outer
one on the broker over the inner rows; answers against DuckDB over the raw rows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.cluster.test_broker_cluster import cluster  # noqa: F401 - the module's cluster fixture
from tests.historical_query.wiki_http import RawRows

pytestmark = pytest.mark.integration

DAY = ["2015-09-12/2015-09-13"]
PER_PAGE = {
    "queryType": "groupBy",
    "dataSource": "wikipedia",
    "intervals": DAY,
    "granularity": "all",
    "dimensions": ["channel", "page"],
    "aggregations": [
        {"type": "count", "name": "edits"},
        {"type": "longSum", "name": "added", "fieldName": "added"},
    ],
}


def post(url: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(url + "/druid/v2/", json=body, timeout=60)


def test_group_by_over_a_group_by(cluster: dict[str, Any], wikipedia_sample: Path) -> None:  # noqa: F811
    outer = {
        "queryType": "groupBy",
        "dataSource": {"type": "query", "query": PER_PAGE},
        "intervals": DAY,
        "granularity": "all",
        "dimensions": ["channel"],
        "filter": {"type": "bound", "dimension": "edits", "lower": "2", "ordering": "numeric"},
        "aggregations": [
            {"type": "count", "name": "pages"},
            {"type": "longMax", "name": "most", "fieldName": "edits"},
            {"type": "longSum", "name": "added", "fieldName": "added"},
        ],
    }
    resp = post(cluster["broker"].url, outer)
    assert resp.status_code == 200, resp.text
    got = sorted(
        (r["event"]["channel"], r["event"]["pages"], r["event"]["most"], r["event"]["added"])
        for r in resp.json()
    )
    want = RawRows(wikipedia_sample).rows(
        "SELECT channel, count(*), max(edits), sum(added) FROM (SELECT channel, page, count(*) AS edits, "
        "sum(added) AS added FROM raw GROUP BY 1, 2) WHERE edits >= 2 GROUP BY 1 ORDER BY 1"
    )
    assert got == sorted(want)


def test_timeseries_over_a_hourly_group_by(cluster: dict[str, Any], wikipedia_sample: Path) -> None:  # noqa: F811
    inner = {**PER_PAGE, "granularity": "hour", "dimensions": ["channel"]}
    outer = {
        "queryType": "timeseries",
        "dataSource": {"type": "query", "query": inner},
        "intervals": DAY,
        "granularity": "day",
        "aggregations": [
            {"type": "count", "name": "groups"},
            {"type": "longSum", "name": "edits", "fieldName": "edits"},
        ],
    }
    resp = post(cluster["broker"].url, outer)
    assert resp.status_code == 200, resp.text
    (groups, edits) = RawRows(wikipedia_sample).one(
        "SELECT count(*), sum(n) FROM (SELECT date_trunc('hour', t), channel, count(*) AS n FROM raw GROUP BY 1, 2)"
    )
    assert resp.json() == [
        {"timestamp": "2015-09-12T00:00:00.000Z", "result": {"groups": groups, "edits": edits}}
    ]


def test_data_nodes_refuse_query_data_sources(cluster: dict[str, Any]) -> None:  # noqa: F811
    historical = cluster["historicals"][0]
    body = {**PER_PAGE, "dataSource": {"type": "query", "query": PER_PAGE}, "dimensions": ["channel"]}
    resp = post(historical.url, body)
    assert resp.status_code == 501 and "broker" in resp.json()["errorMessage"]


def test_expression_inputs_through_the_broker(cluster: dict[str, Any], wikipedia_sample: Path) -> None:  # noqa: F811
    """An aggregator's `expression` input and a virtual column travel from the broker to the data nodes."""
    body = {
        "queryType": "topN",
        "dataSource": "wikipedia",
        "intervals": DAY,
        "granularity": "all",
        "virtualColumns": [{"type": "expression", "name": "lang", "expression": "substring(channel, 1, 2)"}],
        "dimension": "lang",
        "metric": "net",
        "threshold": 3,
        "aggregations": [{"type": "longSum", "name": "net", "expression": "added - deleted"}],
    }
    resp = post(cluster["broker"].url, body)
    assert resp.status_code == 200, resp.text
    want = RawRows(wikipedia_sample).rows(
        "SELECT substring(channel, 2, 2) AS l, sum(added - deleted) AS n FROM raw GROUP BY 1 ORDER BY 2 DESC LIMIT 3"
    )
    assert [(r["lang"], r["net"]) for r in resp.json()[0]["result"]] == want
