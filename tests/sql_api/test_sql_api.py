"""Druid's SQL API on a real broker: Druid's published tutorial answers, generated SQL against DuckDB
running the same SQL over the raw rows, result formats, EXPLAIN, errors, cancellation."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import httpx
import pytest

from bench.hostile.categories import CATEGORIES, hostile_requests
from bench.hostile.guardrails import GUARDRAIL_CATEGORIES
from bench.hostile.run import category_requests, run_requests
from harness.memory import MemoryWatchdog
from tests.cluster.test_broker_cluster import cluster  # noqa: F401 - the module's cluster fixture
from tests.differential.generator import gen_filter
from tests.historical_query.wiki_http import RawRows

pytestmark = pytest.mark.integration

BROKER_MEMORY_LIMIT = (
    3 * 1024**3
)  # the broker killed (and the test failed) past it: the host keeps its memory
DAY = "\"__time\" >= TIMESTAMP '2015-09-12 00:00:00' AND \"__time\" < TIMESTAMP '2015-09-13 00:00:00'"


def sql(broker: Any, query: str, **body: Any) -> httpx.Response:
    return httpx.post(broker.url + "/druid/v2/sql/", json={"query": query, **body}, timeout=60)


def rows(broker: Any, query: str) -> list[dict[str, Any]]:
    resp = sql(broker, query)
    assert resp.status_code == 200, resp.text
    return resp.json()


def test_druid_tutorial_answers(cluster: dict[str, Any]) -> None:  # noqa: F811
    """The numbers Druid's SQL tutorial publishes for the wikipedia sample."""
    broker = cluster["broker"]
    # Druid's answer comes from one DAY segment, where topN is exact; these segments are hourly,
    # where Druid's topN trims each segment (see test_sql_planning), so ask for the exact plan
    top_sql = (
        f"SELECT page, COUNT(*) AS Edits FROM wikipedia WHERE {DAY} GROUP BY page ORDER BY Edits DESC LIMIT 5"
    )
    top = sql(broker, top_sql, context={"useApproximateTopN": False}).json()
    assert top == [{"page": "Wikipedia:Vandalismusmeldung", "Edits": 33},
                   {"page": "User:Cyde/List of candidates for speedy deletion/Subpage", "Edits": 28},
                   {"page": "Jeremy Corbyn", "Edits": 27},
                   {"page": "Wikipedia:Administrators' noticeboard/Incidents", "Edits": 21},
                   {"page": "Flavia Pennetta", "Edits": 20}]  # fmt: skip
    hourly = rows(broker, f"SELECT FLOOR(__time to HOUR) AS HourTime, SUM(deleted) AS LinesDeleted FROM wikipedia "
                          f"WHERE {DAY} GROUP BY 1 LIMIT 3")  # fmt: skip
    assert hourly == [{"HourTime": "2015-09-12T00:00:00.000Z", "LinesDeleted": 1761},
                      {"HourTime": "2015-09-12T01:00:00.000Z", "LinesDeleted": 16208},
                      {"HourTime": "2015-09-12T02:00:00.000Z", "LinesDeleted": 14543}]  # fmt: skip
    scan = rows(broker, "SELECT user, page FROM wikipedia WHERE \"__time\" BETWEEN TIMESTAMP '2015-09-12 02:00:00' "
                        "AND TIMESTAMP '2015-09-12 03:00:00' LIMIT 5")  # fmt: skip
    assert len(scan) == 5 and set(scan[0]) == {"user", "page"}


def test_generated_sql_equals_duckdb_over_the_raw_rows(
    cluster: dict[str, Any],  # noqa: F811
    wikipedia_sample: Path,
) -> None:
    raw = RawRows(wikipedia_sample)
    rnd = random.Random(11)
    shapes = [
        ("SELECT channel, COUNT(*) AS c, SUM(added) AS a FROM {t} WHERE {w} GROUP BY channel", ["channel"]),
        (
            "SELECT countryName, MIN(delta) AS lo, MAX(delta) AS hi FROM {t} WHERE {w} GROUP BY 1",
            ["countryName"],
        ),
        ("SELECT COUNT(*) AS c, SUM(deleted) AS d FROM {t} WHERE {w}", []),
        (
            "SELECT isRobot, cityName, COUNT(*) AS c FROM {t} WHERE {w} GROUP BY isRobot, cityName",
            ["isRobot", "cityName"],
        ),
        (
            "SELECT COUNT(*) FILTER (WHERE added > 10) AS big, COUNT(cityName) AS cities FROM {t} WHERE {w}",
            [],
        ),
    ]
    compared = 0
    for _ in range(40):
        _, where = gen_filter(rnd)
        template, _keys = rnd.choice(shapes)
        got = rows(cluster["broker"], template.format(t="wikipedia", w=where))
        cur = raw.conn.execute(template.format(t="raw", w=where))
        names = [d[0] for d in cur.description]
        want = [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
        canon = lambda rs: sorted(json.dumps(r, sort_keys=True, default=str) for r in rs)  # noqa: E731
        assert canon(got) == canon(want), template.format(t="wikipedia", w=where)
        compared += 1
    assert compared == 40


def test_result_formats_and_headers(cluster: dict[str, Any]) -> None:  # noqa: F811
    broker = cluster["broker"]
    q = "SELECT channel, COUNT(*) AS c FROM wikipedia GROUP BY channel ORDER BY c DESC LIMIT 2"
    obj = sql(broker, q, header=True, typesHeader=True, sqlTypesHeader=True)
    assert obj.headers["X-Druid-SQL-Header-Included"] == "yes" and obj.headers["X-Druid-SQL-Query-Id"]
    assert obj.json()[0] == {
        "channel": {"type": "STRING", "sqlType": "VARCHAR"},
        "c": {"type": "LONG", "sqlType": "BIGINT"},
    }
    assert obj.content.startswith(b'[{"channel"')  # compact, as pydruid's streaming parser needs
    arr = sql(broker, q, resultFormat="array", header=True).json()
    assert arr[0] == ["channel", "c"] and arr[1][0] == "#en.wikipedia"
    lines = sql(broker, q, resultFormat="arrayLines").text
    assert lines.endswith("\n\n") and json.loads(lines.splitlines()[0])[0] == "#en.wikipedia"
    objects = sql(broker, q, resultFormat="objectLines").text.splitlines()
    assert json.loads(objects[0])["channel"] == "#en.wikipedia" and objects[-1] == ""
    csv = sql(broker, q, resultFormat="csv", header=True).text.splitlines()
    assert csv[0] == "channel,c" and csv[1].startswith("#en.wikipedia,")
    plain = httpx.post(
        broker.url + "/druid/v2/sql", content=q, headers={"Content-Type": "text/plain"}, timeout=60
    )
    assert plain.status_code == 200 and plain.json()[0]["channel"] == "#en.wikipedia"
    params = sql(broker, "SELECT COUNT(*) AS c FROM wikipedia WHERE channel = ?",
                 parameters=[{"type": "VARCHAR", "value": "#en.wikipedia"}]).json()  # fmt: skip
    assert params == [{"c": 11549}]


def test_explain_errors_and_cancel(cluster: dict[str, Any]) -> None:  # noqa: F811
    broker = cluster["broker"]
    plan = rows(broker, "EXPLAIN PLAN FOR SELECT channel, COUNT(*) FROM wikipedia GROUP BY channel")
    assert set(plan[0]) == {"PLAN", "RESOURCES", "ATTRIBUTES"}
    assert json.loads(plan[0]["PLAN"])[0]["query"]["queryType"] == "groupBy"
    for bad, status, category in [("SELEC x", 400, "INVALID_INPUT"), ("SELECT nope FROM wikipedia", 400, "INVALID_INPUT"),
                                  ("SELECT * FROM missing_table", 400, "INVALID_INPUT"),
                                  ("INSERT INTO wikipedia SELECT 1", 400, "INVALID_INPUT"),  # "consider using MSQ"
                                  ("SELECT a FROM wikipedia JOIN other ON 1 = 1", 400, "INVALID_INPUT")]:  # fmt: skip
        resp = sql(broker, bad)
        body = resp.json()
        assert resp.status_code == status and body["category"] == category, (bad, body)
        assert {"error", "errorCode", "persona", "category", "errorMessage", "context"} <= set(body)
        assert "\x1b" not in body["errorMessage"], body  # no terminal colour codes from the parser
    assert httpx.delete(broker.url + "/druid/v2/sql/no-such-query", timeout=10).status_code == 404
    assert rows(broker, "SELECT 1 AS one") == [{"one": 1}]


@pytest.mark.timeout(900)
def test_malformed_sql_fuzz_never_a_server_error(cluster: dict[str, Any]) -> None:  # noqa: F811
    """Valid statements cut, spliced and garbled at random, then hostile requests of every category
    (deep nesting, NOT chains, huge IN lists, control characters in ids, wrong JSON types, garbage
    bytes, and issue 36's: cross joins, recursion, huge literals, bad regexes and timestamps, 10 MB
    statements, native nesting): the status Druid's rules give with Druid's error body, none past
    its deadline, the broker's memory bounded throughout (a watchdog reads its VmRSS), and the broker
    serving right afterwards."""
    broker = cluster["broker"]
    with MemoryWatchdog({"broker": broker.pid}, limit_bytes=BROKER_MEMORY_LIMIT,
                        on_over=lambda _name: broker.kill()) as watchdog:  # fmt: skip
        _fuzz(broker)
    print("broker memory during the fuzz:", watchdog.summary())
    assert not watchdog.over(BROKER_MEMORY_LIMIT), watchdog.summary()


def _fuzz(broker: Any) -> None:
    seeds = [
        "SELECT channel, COUNT(*) AS c FROM wikipedia WHERE countryName IS NULL GROUP BY channel ORDER BY c DESC LIMIT 3",
        "SELECT FLOOR(__time TO HOUR), SUM(added) FILTER (WHERE isRobot = 'true') FROM wikipedia GROUP BY 1",
        'SELECT "user", page FROM wikipedia WHERE "__time" BETWEEN TIMESTAMP \'2015-09-12 01:00:00\' AND '
        "TIMESTAMP '2015-09-12 02:00:00' AND added > 10 LIMIT 5",
        "SELECT TABLE_NAME FROM INFORMATION_SCHEMA.TABLES WHERE TABLE_SCHEMA = 'druid'",
    ]
    tokens = ["(", ")", "'", '"', ",", "SELECT", "FROM", "WHERE", "GROUP BY", "NULL", "*", "1e309", "--", ";",
              "__time", "COUNT(", "CAST(", " AS ", "\\", "TIMESTAMP 'x'", "INTERVAL '1' DAY"]  # fmt: skip
    rnd = random.Random(5)
    for _ in range(150):
        text = rnd.choice(seeds)
        for _ in range(rnd.randint(1, 3)):
            at = rnd.randrange(len(text) + 1)
            if rnd.random() < 0.5:
                text = text[:at] + rnd.choice(tokens) + text[at:]
            else:
                text = text[:at] + text[at + rnd.randint(1, 8) :]
        resp = sql(broker, text)
        assert resp.status_code in (200, 400, 501), (text, resp.status_code, resp.text)
        if resp.status_code != 200:
            assert {"error", "errorCode", "category", "errorMessage"} <= set(resp.json()), text
    assert rows(broker, "SELECT COUNT(*) AS c FROM wikipedia") == [{"c": 39244}]
    # hostile categories (bench/hostile/categories.py): the status Druid's rules give, never a 5xx or a
    # dropped connection (httpx would raise), and the broker's health check answering after each
    seen = set()
    for hostile in hostile_requests(rnd, per_category=25):
        resp = httpx.post(broker.url + "/druid/v2/sql", timeout=120, **hostile.kwargs)
        assert resp.status_code in hostile.statuses, (str(hostile), resp.status_code, resp.text[:300])
        if resp.status_code != 200:
            assert {"error", "errorCode", "category", "errorMessage"} <= set(resp.json()), str(hostile)
        assert httpx.get(broker.url + "/status/health", timeout=5).status_code == 200, str(hostile)
        seen.add(hostile.category)
    assert seen == set(CATEGORIES)
    assert rows(broker, "SELECT COUNT(*) AS c FROM wikipedia") == [{"c": 39244}]
    # issue 36's categories (bench/hostile/guardrails.py), three at a time, each judged with its deadline
    outcomes = run_requests(broker.url, category_requests(rnd, 4, list(GUARDRAIL_CATEGORIES)), concurrency=3)
    problems = [str(o) for o in outcomes if o.problem]
    assert not problems, "\n".join(problems[:10])
    assert {o.category for o in outcomes} == set(GUARDRAIL_CATEGORIES)
    assert httpx.get(broker.url + "/status/health", timeout=5).status_code == 200
    assert rows(broker, "SELECT COUNT(*) AS c FROM wikipedia") == [{"c": 39244}]
