"""Which native query Druid SQL plans to (topN only under Druid's own rule), and answers of the shapes
planned in several native steps (UNION ALL, subqueries, exact COUNT DISTINCT) against DuckDB over the
raw rows."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.cluster.test_broker_cluster import cluster  # noqa: F401 - the module's cluster fixture

pytestmark = pytest.mark.integration


def post(broker: Any, query: str, **body: Any) -> httpx.Response:
    return httpx.post(broker.url + "/druid/v2/sql", json={"query": query, **body}, timeout=60)


def planned(broker: Any, query: str, context: dict[str, Any] | None = None) -> dict[str, Any]:
    resp = post(broker, "EXPLAIN PLAN FOR " + query, context=context or {})
    assert resp.status_code == 200, resp.text
    native: dict[str, Any] = json.loads(resp.json()[0]["PLAN"])[0]["query"]
    return native


TOP = "SELECT page, COUNT(*) AS c FROM wikipedia GROUP BY page "


@pytest.mark.parametrize(
    ("tail", "context", "kind"),
    [
        ("ORDER BY c DESC LIMIT 5", None, "topN"),
        ("ORDER BY c LIMIT 5", None, "topN"),  # ascending: an inverted metric
        ("ORDER BY c DESC LIMIT 5", {"useApproximateTopN": False}, "groupBy"),
        ("ORDER BY c DESC LIMIT 5", {"useApproximateTopN": "false"}, "groupBy"),
        ("ORDER BY page LIMIT 5", None, "groupBy"),  # ordered by the dimension itself
        ("ORDER BY c DESC, page LIMIT 5", None, "groupBy"),  # several keys
        ("ORDER BY c DESC LIMIT 5 OFFSET 2", None, "groupBy"),
        ("ORDER BY c DESC LIMIT 100001", None, "groupBy"),  # past Druid's maxTopNLimit
        ("ORDER BY c DESC", None, "groupBy"),  # no limit
        ("HAVING COUNT(*) > 3 ORDER BY c DESC LIMIT 5", None, "groupBy"),
    ],
)
def test_topn_only_under_druids_rule(
    cluster: dict[str, Any],  # noqa: F811
    tail: str,
    context: dict[str, Any] | None,
    kind: str,
) -> None:
    native = planned(cluster["broker"], TOP + tail, context)
    assert native["queryType"] == kind
    if kind == "topN" and "DESC" not in tail:
        assert native["metric"] == {"type": "inverted", "metric": {"type": "numeric", "metric": "c"}}


def test_topn_and_groupby_answer_alike_on_the_tutorial(cluster: dict[str, Any]) -> None:  # noqa: F811
    broker = cluster["broker"]
    query = TOP + "ORDER BY c DESC LIMIT 5"
    approximate = post(broker, query).json()
    exact = post(broker, query, context={"useApproximateTopN": False}).json()
    assert approximate == exact
    assert approximate[0] == {"page": "Wikipedia:Vandalismusmeldung", "c": 33}
