"""Refusals before routing (broker_service.refusal_path) answer what the handlers answer: Druid's 429
with its body and ids, a Retry-After, counted; the handlers' own errors first; nothing refused or
read ahead while admission has room. A real uvicorn server with fake data nodes; the lane is filled
by hand here (tests/cluster/test_overload fills it with real queries)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import httpx
import orjson
import pytest

from broker_service.app import create_app
from broker_service.broker import Broker, BrokerSettings
from broker_service.laning import LOW, hilo
from strata.query.base import Query, register
from tests.broker.helpers import SumQuery, serve
from tests.broker.test_query_runner import DAYS, WEEK, Cluster, oracle

register(SumQuery)

LANE_FULL = "Too many concurrent queries for lane 'low', query capacity of 1 exceeded. Please try your query again later."


def native(**context: Any) -> bytes:
    return orjson.dumps(
        {"queryType": "testSum", "dataSource": "wiki", "intervals": [WEEK], "context": context}
    )


@pytest.fixture
def broker_http() -> Iterator[tuple[Broker, httpx.Client]]:
    with ExitStack() as stack:
        c = Cluster(stack)
        c.node(serves=DAYS)
        settings = BrokerSettings(max_concurrent_queries=4, query_queue=0, laning=hilo(4, 25))
        broker = Broker(settings, c.view, None)
        port = stack.enter_context(serve(create_app(broker)))
        yield broker, stack.enter_context(httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=20))


def refused(resp: httpx.Response) -> dict[str, Any]:
    assert resp.status_code == 429, resp.text[:300]
    assert resp.headers["Retry-After"] == "1"
    body: dict[str, Any] = resp.json()
    assert body["error"] == "Query capacity exceeded" and body["category"] == "CAPACITY_EXCEEDED"
    assert body["errorClass"] == "org.apache.druid.query.QueryCapacityExceededException"
    return body


def counted(http: httpx.Client, line: str) -> float:
    found = [m for m in http.get("/metrics").text.splitlines() if m.startswith(line + " ")]
    return float(found[0].rpartition(" ")[2]) if found else 0.0


def test_a_full_lane_refuses_a_known_body_before_routing_as_the_handler_refuses_it(
    broker_http: tuple[Broker, httpx.Client],
) -> None:
    broker, http = broker_http
    assert http.post("/druid/v2/", content=native(priority=-1)).json() == [oracle(DAYS)]  # room: answered
    broker.admission.lane_running[LOW] = 1
    parses: list[bytes] = []
    parse = broker.parsed_bodies.parse

    def counted_parse(body: bytes, limit: int) -> Query:
        parses.append(body)
        return parse(body, limit)

    broker.parsed_bodies.parse = counted_parse  # type: ignore[method-assign,assignment]
    first = http.post(
        "/druid/v2/", content=native(priority=-1, queryId="q1")
    )  # not parsed before: the handler
    again = http.post(
        "/druid/v2/", content=native(priority=-1, queryId="q1")
    )  # remembered: refused before routing
    assert len(parses) == 1
    assert refused(first) == refused(again) and refused(first)["errorMessage"] == LANE_FULL
    assert first.headers["X-Druid-Query-Id"] == again.headers["X-Druid-Query-Id"] == "q1"
    unnamed = [http.post("/druid/v2/", content=native(priority=-1)) for _ in range(2)]
    ids = {refused(r) and r.headers["X-Druid-Query-Id"] for r in unnamed}
    assert len(ids) == 2  # each refusal its own id, as each query has
    assert counted(http, 'strata_broker_query_capacity_exceeded_total{lane="low"}') == 4
    assert counted(http, 'strata_broker_queries_total{status="429",type="testSum"}') == 4
    pretty = http.post("/druid/v2/?pretty", content=native(priority=-1))  # the handler's, indented
    assert refused(pretty)["errorMessage"] == LANE_FULL and b"\n" in pretty.content
    assert http.post("/druid/v2/", content=native(priority=0)).json() == [oracle(DAYS)]  # no lane: runs
    broker.admission.lane_running[LOW] = 0
    assert http.post("/druid/v2/", content=native(priority=-1)).json() == [oracle(DAYS)]


def test_the_handlers_errors_come_before_a_refusal(broker_http: tuple[Broker, httpx.Client]) -> None:
    broker, http = broker_http
    broker.admission.lane_running[LOW] = 1
    for _ in range(2):  # a bad body is never remembered, so never refused ahead of its 400
        bad = http.post("/druid/v2/", content=native(priority="high"))
        assert bad.status_code == 400 and bad.json()["category"] == "INVALID_INPUT", bad.text
    assert http.post("/druid/v2/", content=b"{nope").status_code == 400
    sql = {"query": "SELECT 1", "context": {"priority": -1}}
    for wrong in ({"resultFormat": "yaml"}, {"context": {"priority": -1, "sqlQueryId": "a\nb"}}):
        resp = http.post("/druid/v2/sql", json={**sql, **wrong})
        assert resp.status_code == 400, resp.text


def test_a_sql_statement_is_refused_before_routing_unless_set_statements_may_move_it(
    broker_http: tuple[Broker, httpx.Client],
) -> None:
    broker, http = broker_http
    broker.admission.lane_running[LOW] = 1
    resp = http.post(
        "/druid/v2/sql", json={"query": "SELECT 1", "context": {"priority": -1, "sqlQueryId": "s1"}}
    )
    body = refused(resp)
    assert body["errorMessage"] == LANE_FULL and body["context"]["sourceType"] == "sql"
    assert resp.headers["X-Druid-SQL-Query-Id"] == "s1"
    text = http.post("/druid/v2/sql", content=b"SELECT 1", headers={"content-type": "text/plain"})
    assert text.status_code == 200  # no context: no lane
    moved = {"query": "/* c */ SET priority = 0; SELECT 1 AS x", "context": {"priority": -1}}
    assert http.post("/druid/v2/sql", json=moved).json() == [{"x": 1}]
    assert counted(http, 'strata_broker_query_capacity_exceeded_total{lane="low"}') == 1
    broker.admission.lane_running[LOW] = 0
    assert http.post(
        "/druid/v2/sql", json={"query": "SELECT 1 AS x", "context": {"priority": -1}}
    ).json() == [{"x": 1}]


def test_a_full_broker_refuses_every_query_with_the_totals_message(
    broker_http: tuple[Broker, httpx.Client],
) -> None:
    broker, http = broker_http
    broker.admission.running = 4
    for _ in range(2):
        body = refused(http.post("/druid/v2/", content=native()))
        assert body["errorMessage"].startswith(
            "Too many concurrent queries, total query capacity of 4 exceeded"
        )
    assert counted(http, 'strata_broker_query_capacity_exceeded_total{lane="total"}') == 2
    broker.admission.running = 0
    assert http.post("/druid/v2/", content=native()).json() == [oracle(DAYS)]
