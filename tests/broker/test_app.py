"""The broker's HTTP API over a real uvicorn server with fake data nodes behind it."""

from __future__ import annotations

import concurrent.futures
from contextlib import ExitStack

import httpx
import orjson
import pytest

from broker_service.app import create_app
from broker_service.broker import Broker, BrokerSettings
from broker_service.response_context import encode_response_context
from strata.query.base import register
from tests.broker.helpers import SumQuery, segment, serve
from tests.broker.test_query_runner import DAYS, WEEK, Cluster, oracle

register(SumQuery)


def query_json(**context) -> dict:
    return {"queryType": "testSum", "dataSource": "wiki", "intervals": [WEEK], "context": context}


@pytest.fixture
def cluster():
    with ExitStack() as stack:
        c = Cluster(stack)
        c.node(serves=DAYS)
        yield c


def start(stack: ExitStack, c: Cluster, **settings) -> httpx.Client:
    broker = Broker(BrokerSettings(**settings), c.view, None)
    port = stack.enter_context(serve(create_app(broker)))
    return stack.enter_context(httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=20))


def test_query_answer_headers_and_pretty(cluster):
    with ExitStack() as stack:
        http = start(stack, cluster)
        r = http.post("/druid/v2/", json=query_json(queryId="abc"))
        assert r.status_code == 200 and r.headers["content-type"] == "application/json"
        assert r.json() == [oracle(DAYS)]
        assert r.headers["X-Druid-Query-Id"] == "abc"
        assert orjson.loads(r.headers["X-Druid-Response-Context"]) == {}
        assert b"\n" not in r.content
        pretty = http.post("/druid/v2?pretty", json=query_json())
        assert pretty.json() == [oracle(DAYS)] and b"\n" in pretty.content


@pytest.mark.parametrize(
    ("body", "status", "error"),
    [
        (b"{not json", 400, "Json parse failed"),
        (b'{"queryType":"nope","dataSource":"wiki","intervals":["2015/2016"]}', 400, "druidException"),
        (b'{"queryType":"testSum","dataSource":"wiki"}', 400, "druidException"),
        (b'{"queryType":"testSum","dataSource":"wiki","intervals":["garbage"]}', 400, "druidException"),
        (b"[1,2]", 400, "druidException"),
    ],
)
def test_malformed_queries_get_druid_errors(cluster, body, status, error):
    with ExitStack() as stack:
        http = start(stack, cluster)
        r = http.post("/druid/v2/", content=body, headers={"Content-Type": "application/json"})
        assert r.status_code == status
        assert r.json()["error"] == error and r.json()["errorMessage"]
        assert "Traceback" not in r.text
        assert http.get("/status/health").json() is True  # still serving


def test_missing_segments_error_and_partial_flag_in_header():
    with ExitStack() as stack:
        c = Cluster(stack)
        c.node(serves=DAYS[1:], announces=DAYS)
        http = start(stack, c)
        r = http.post("/druid/v2/", json=query_json())
        assert r.status_code == 500
        assert r.json()["errorClass"] == "org.apache.druid.segment.SegmentMissingException"
        r = http.post("/druid/v2/", json=query_json(returnPartialResults=True))
        assert r.status_code == 200 and r.json() == [oracle(DAYS[1:])]
        ctx = orjson.loads(r.headers["X-Druid-Response-Context"])
        assert ctx["missingSegments"] == [DAYS[0].descriptor.to_json()]


def test_capacity_exceeded_is_429():
    with ExitStack() as stack:
        c = Cluster(stack)
        _, slow = c.node(serves=DAYS)
        slow.delay_s = 1.5
        http = start(stack, c, max_concurrent_queries=1, query_queue=0)
        with concurrent.futures.ThreadPoolExecutor(3) as pool:
            futures = [pool.submit(http.post, "/druid/v2/", json=query_json()) for _ in range(3)]
            statuses = sorted(f.result().status_code for f in futures)
            bodies = [f.result().json() for f in futures]
        assert statuses[0] == 200 and statuses[-1] == 429
        assert any(isinstance(b, dict) and b.get("error") == "Query capacity exceeded" for b in bodies)


def test_delete_cancels_a_running_query():
    with ExitStack() as stack:
        c = Cluster(stack)
        _, slow = c.node(serves=DAYS)
        slow.delay_s = 2
        http = start(stack, c)
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            future = pool.submit(http.post, "/druid/v2/", json=query_json(queryId="qq"))
            for _ in range(200):
                if slow.requests:
                    break
                concurrent.futures.wait([future], timeout=0.01)
            assert http.delete("/druid/v2/qq").status_code == 202
            r = future.result()
        assert r.status_code == 500 and r.json()["error"] == "Query cancelled"


def test_datasource_endpoints(cluster):
    with ExitStack() as stack:
        http = start(stack, cluster)
        assert http.get("/druid/v2/datasources").json() == ["wiki"]
        # Druid looks back one week from now by default: 2015 data is out of that window
        assert http.get("/druid/v2/datasources/wiki").json() == {"dimensions": [], "metrics": []}
        r = http.get("/druid/v2/datasources/wiki", params={"interval": WEEK})
        assert r.json() == {"dimensions": ["page"], "metrics": ["added"]}
        full = http.get("/druid/v2/datasources/wiki", params={"interval": WEEK, "full": ""}).json()
        assert full == {
            "2015-09-01T00:00:00.000Z/2015-09-07T00:00:00.000Z": {
                "dimensions": ["page"],
                "metrics": ["added"],
            }
        }
        assert http.get("/druid/v2/datasources/wiki/dimensions", params={"interval": WEEK}).json() == ["page"]
        cands = http.get(
            "/druid/v2/datasources/wiki/candidates", params={"intervals": "2015-09-01/2015-09-03"}
        ).json()
        assert [c["itvl"] for c in cands] == [str(DAYS[0].interval), str(DAYS[1].interval)]
        assert len(cands[0]["locations"]) == 1 and cands[0]["locations"][0]["type"] == "historical"
        posted = http.post(
            "/druid/v2/candidates", json={**query_json(), "intervals": ["2015-09-01/2015-09-03"]}
        )
        assert posted.json() == cands
        bad = http.get("/druid/v2/datasources/wiki", params={"interval": "nope"})
        assert bad.status_code == 400


def test_status_ready_and_metrics(cluster):
    with ExitStack() as stack:
        http = start(stack, cluster)
        http.post("/druid/v2/", json=query_json())
        status = http.get("/status").json()
        assert status["segments"] == len(DAYS) and status["servers"] == 1
        assert http.get("/status/ready").json() is True
        text = http.get("/metrics").text
        assert 'strata_broker_queries_total{status="200",type="testSum"} 1.0' in text
        assert f"strata_broker_inventory_segments {float(len(DAYS))}" in text
        assert "strata_broker_node_request_seconds_count" in text
        assert "strata_broker_event_loop_lag_seconds_count" in text


def test_response_context_header_is_capped():
    ctx = {
        "missingSegments": [
            segment(interval=f"2015-01-01T{h:02d}/2015-01-01T{h + 1:02d}").descriptor.to_json()
            for h in range(23)
        ]
        * 20,
        "uncoveredIntervals": ["x"] * 10,
    }
    text = encode_response_context(ctx, max_chars=2000)
    assert len(text) <= 2000
    out = orjson.loads(text)
    assert out["truncated"] is True and 0 < len(out["missingSegments"]) < 23 * 20
    assert encode_response_context({"a": 1}) == '{"a":1}'
    # a segment of a datasource named in another script: the header stays ASCII, the JSON the same
    named = {"missingSegments": [{"dataSource": "日本語", "ver": "v"}]}
    text = encode_response_context(named)
    assert text.isascii() and orjson.loads(text) == named


def test_a_repeated_body_gets_a_fresh_query_id_each_time_unless_it_names_one(cluster):
    with ExitStack() as stack:
        http = start(stack, cluster)
        body = orjson.dumps(query_json())
        ids = [http.post("/druid/v2/", content=body).headers["X-Druid-Query-Id"] for _ in range(3)]
        assert len(set(ids)) == 3
        named = orjson.dumps(query_json(queryId="dash"))
        assert [http.post("/druid/v2/", content=named).headers["X-Druid-Query-Id"] for _ in range(2)] == [
            "dash"
        ] * 2
