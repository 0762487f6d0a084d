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


def test_topn_and_groupby_answer_alike_on_the_tutorial(
    cluster: dict[str, Any],  # noqa: F811
    wikipedia_sample: Any,
) -> None:
    from tests.historical_query.wiki_http import RawRows
    from tests.topn_oracle import druid_topn

    broker = cluster["broker"]
    query = TOP + "ORDER BY c DESC LIMIT 5"
    exact = post(broker, query, context={"useApproximateTopN": False}).json()
    assert exact[0] == {"page": "Wikipedia:Vandalismusmeldung", "c": 33}
    # Druid's topN approximation on the hourly segments: each keeps the 1,000 pages Druid's engine
    # keeps, the kept counts are summed and ranked; whatever the cache holds, whichever node serves
    hours: dict[int, dict[str | None, list[float]]] = {}
    for hour, page, count in RawRows(wikipedia_sample).rows(
        "SELECT hour(t), page, count(*) FROM raw GROUP BY 1, 2"
    ):
        hours.setdefault(hour, {})[page] = [count]
    want = [{"page": page, "c": int(c)} for page, c in druid_topn(hours.values(), 0, 5)]
    for _ in range(2):  # cold, then from whatever the broker cached
        assert post(broker, query).json() == want
    exact_counts = {
        r["page"]: r["c"] for r in post(broker, TOP, context={"useApproximateTopN": False}).json()
    }
    assert want != exact and all(r["c"] <= exact_counts[r["page"]] for r in want)  # only ever lower


# (Druid SQL, context, the same question for DuckDB over `raw`)
COMPOSED = [
    (
        "SELECT channel, COUNT(*) AS n FROM wikipedia WHERE countryName = 'France' GROUP BY channel "
        "UNION ALL SELECT 'all' AS channel, COUNT(*) AS n FROM wikipedia",
        None,
        "SELECT channel, count(*) AS n FROM raw WHERE countryName = 'France' GROUP BY channel "
        "UNION ALL SELECT 'all' AS channel, count(*) AS n FROM raw",
    ),
    (
        "SELECT COUNT(*) AS pages, MAX(c) AS top, SUM(c) AS edits FROM "
        "(SELECT page, COUNT(*) AS c FROM wikipedia GROUP BY page) AS t WHERE c > 2",
        None,
        "SELECT count(*) AS pages, max(c) AS top, sum(c) AS edits FROM "
        "(SELECT page, count(*) AS c FROM raw GROUP BY page) AS t WHERE c > 2",
    ),
    (
        "SELECT channel, COUNT(*) AS n FROM wikipedia WHERE countryName IN "
        "(SELECT countryName FROM wikipedia WHERE cityName = 'Paris') GROUP BY channel",
        None,
        "SELECT channel, count(*) AS n FROM raw WHERE countryName IN "
        "(SELECT countryName FROM raw WHERE cityName = 'Paris') GROUP BY channel",
    ),
    (
        "SELECT COUNT(*) AS n FROM wikipedia WHERE cityName IN (SELECT cityName FROM wikipedia WHERE 1 = 0)",
        None,
        "SELECT count(*) AS n FROM raw WHERE cityName IN (SELECT cityName FROM raw WHERE 1 = 0)",
    ),
    (
        "SELECT channel, COUNT(DISTINCT \"user\") AS u FROM wikipedia WHERE channel LIKE '#e%' GROUP BY channel",
        {"useApproximateCountDistinct": False},
        "SELECT channel, count(DISTINCT \"user\") AS u FROM raw WHERE channel LIKE '#e%' GROUP BY channel",
    ),
    (  # found by the SQL differential run: the counted column is also the grouping key
        "SELECT cityName AS d, COUNT(DISTINCT cityName) AS u FROM wikipedia WHERE countryName = 'Italy' GROUP BY 1",
        {"useApproximateCountDistinct": False},
        "SELECT cityName AS d, count(DISTINCT cityName) AS u FROM raw WHERE countryName = 'Italy' GROUP BY 1",
    ),
    (
        "SELECT COUNT(DISTINCT cityName) AS cities FROM wikipedia",
        {"useApproximateCountDistinct": False},
        "SELECT count(DISTINCT cityName) AS cities FROM raw",
    ),
    (
        "SELECT h, SUM(n) AS n FROM (SELECT TIME_FLOOR(__time, 'PT6H') AS h, channel, COUNT(*) AS n "
        "FROM wikipedia GROUP BY 1, 2) GROUP BY h",
        None,
        "SELECT strftime(time_bucket(INTERVAL 6 HOUR, t), '%Y-%m-%dT%H:%M:%S.000Z') AS h, count(*) AS n "
        "FROM raw GROUP BY 1",
    ),
]


@pytest.mark.parametrize(("druid", "context", "duck"), COMPOSED)
def test_composed_statements_equal_duckdb(
    cluster: dict[str, Any],  # noqa: F811
    wikipedia_sample: Any,
    druid: str,
    context: dict[str, Any] | None,
    duck: str,
) -> None:
    from tests.sql_api.test_sql_expressions import assert_same_rows

    assert_same_rows(cluster["broker"], wikipedia_sample, druid, duck, context)


LA = {"sqlTimeZone": "America/Los_Angeles"}


def test_sql_time_zone_floors_parses_and_prints_in_the_zone(
    cluster: dict[str, Any],  # noqa: F811
    wikipedia_sample: Any,
) -> None:
    from tests.historical_query.wiki_http import RawRows

    raw = RawRows(wikipedia_sample)
    broker = cluster["broker"]
    days = post(
        broker, "SELECT FLOOR(__time TO DAY) AS d, COUNT(*) AS n FROM wikipedia GROUP BY 1", context=LA
    )
    assert days.status_code == 200, days.text
    want = raw.rows(
        "SELECT strftime(date_trunc('day', timezone('America/Los_Angeles', t::TIMESTAMPTZ)), '%Y-%m-%d'), count(*) "
        "FROM raw GROUP BY 1 ORDER BY 1"
    )
    assert [(r["d"], r["n"]) for r in days.json()] == [(f"{d}T00:00:00.000-07:00", n) for d, n in want]
    # a TIMESTAMP literal is a wall-clock time of the zone
    late = post(
        broker,
        "SELECT COUNT(*) AS n FROM wikipedia WHERE __time >= TIMESTAMP '2015-09-12 00:00:00'",
        context=LA,
    )
    assert late.json() == [
        {"n": raw.scalar("SELECT count(*) FROM raw WHERE t >= TIMESTAMP '2015-09-12 07:00:00'")}
    ]
    # functions default to the zone; scanned timestamps print in it
    first = post(
        broker,
        "SELECT __time, TIME_FORMAT(__time, 'HH:mm') AS hm, TIME_EXTRACT(__time, 'HOUR') AS h FROM wikipedia "
        "ORDER BY __time LIMIT 1",
        context=LA,
    )
    local = raw.one(
        "SELECT strftime(timezone('America/Los_Angeles', min(t)::TIMESTAMPTZ), '%Y-%m-%dT%H:%M:%S.%g'), "
        "strftime(timezone('America/Los_Angeles', min(t)::TIMESTAMPTZ), '%H:%M'), "
        "hour(timezone('America/Los_Angeles', min(t)::TIMESTAMPTZ)) FROM raw"
    )
    assert first.json() == [{"__time": local[0] + "-07:00", "hm": local[1], "h": local[2]}]
    bad = post(broker, "SELECT 1", context={"sqlTimeZone": "Mars/Olympus_Mons"})
    assert bad.status_code == 400 and "sqlTimeZone" in bad.json()["errorMessage"]


def test_selections_stream_chunk_by_chunk_with_limits_across_chunks(
    cluster: dict[str, Any],  # noqa: F811
    wikipedia_sample: Any,
) -> None:
    """24 hourly segments, chunks of 1, 2 and 4: offsets and limits that cross chunk boundaries, in both time
    orders, equal DuckDB over the raw rows; the body arrives in several pieces."""
    from tests.historical_query.wiki_http import RawRows, iso_utc

    raw = RawRows(wikipedia_sample)
    broker = cluster["broker"]
    everything = raw.rows("SELECT ms, page FROM raw")
    with httpx.stream(
        "POST", broker.url + "/druid/v2/sql", json={"query": "SELECT __time, page FROM wikipedia"}, timeout=60
    ) as resp:
        assert resp.status_code == 200
        pieces = [piece for piece in resp.iter_raw() if piece]
    got = json.loads(b"".join(pieces))
    assert len(pieces) > 1
    assert sorted((r["__time"], r["page"]) for r in got) == sorted((iso_utc(ms), p) for ms, p in everything)
    for order in ("", " DESC"):
        resp = post(
            broker, f"SELECT __time, page FROM wikipedia ORDER BY __time{order} LIMIT 15000 OFFSET 9000"
        )
        times = [r["__time"] for r in resp.json()]
        want = raw.rows(f"SELECT ms FROM raw ORDER BY ms{order} LIMIT 15000 OFFSET 9000")
        assert times == [iso_utc(ms) for (ms,) in want]
    csv_lines = post(broker, "SELECT page FROM wikipedia LIMIT 3", resultFormat="csv", header=True).text
    assert csv_lines.splitlines()[0] == "page" and len(csv_lines.strip().splitlines()) == 4


def test_a_repeated_statement_is_served_from_the_cache(cluster: dict[str, Any]) -> None:  # noqa: F811
    """SQL runs through the broker's own native path: a repeat on a caching broker reaches no data node."""
    from harness.processes import StrataProcess
    from tests.cluster.test_broker_cluster import HOURS, historical_queries, wait_for_segments

    broker = StrataProcess("broker", ["--zk", cluster["historicals"][0].args[1], "--zk-base", cluster["base"],
                                      "--cache", "lru", "--cache-size", "100000000"],
                           cluster["root"] / "broker-sql-cache.log").start()  # fmt: skip
    try:
        wait_for_segments(broker, HOURS)
        # a timeseries and a topN: the types Druid caches per segment (groupBy is not, as in Druid)
        statement = "SELECT FLOOR(__time TO HOUR) AS h, SUM(added) AS added FROM wikipedia GROUP BY 1"
        topn = "SELECT page, SUM(added) AS added FROM wikipedia GROUP BY 1 ORDER BY 2 DESC LIMIT 5"
        cold = [post(broker, q).json() for q in (statement, topn)]
        before = sum(historical_queries(h) for h in cluster["historicals"])
        warm = [post(broker, q).json() for q in (statement, topn)]
        after = sum(historical_queries(h) for h in cluster["historicals"])
        assert warm == cold and len(cold[0]) == HOURS and len(cold[1]) == 5
        assert after == before
    finally:
        broker.stop()


def test_an_aggregating_subquery_plans_as_a_query_data_source(cluster: dict[str, Any]) -> None:  # noqa: F811
    """As Druid plans it: the outer query over `{"type": "query"}` wrapping the inner groupBy."""
    native = planned(
        cluster["broker"],
        "SELECT COUNT(*) AS pages, MAX(c) AS top FROM (SELECT page, COUNT(*) AS c FROM wikipedia GROUP BY page) "
        "AS t WHERE c > 2",
    )
    assert native["queryType"] == "timeseries" and native["dataSource"]["type"] == "query"
    assert native["dataSource"]["query"]["queryType"] == "groupBy"
    assert native["filter"] == {
        "type": "range",
        "column": "c",
        "matchValueType": "LONG",
        "lower": 2,
        "lowerOpen": True,
    }
