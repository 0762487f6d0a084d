"""`GET /status/cache` and the cache's Prometheus metrics, over a real LRU and a real uvicorn broker."""

from __future__ import annotations

from contextlib import ExitStack

import httpx

from broker_service.app import create_app
from broker_service.broker import Broker, BrokerSettings
from broker_service.segment_cache import build_cache_policy
from tests.broker.helpers import serve
from tests.broker.test_app import query_json
from tests.broker.test_query_runner import DAYS, Cluster, oracle


def metric(text: str, name: str) -> float:
    (line,) = [ln for ln in text.splitlines() if ln.startswith(name + " ") or ln.startswith(name + "{")]
    return float(line.rsplit(" ", 1)[1])


def test_status_cache_and_metrics_follow_hits_and_misses():
    with ExitStack() as stack:
        c = Cluster(stack)
        _, node = c.node(serves=DAYS)
        policy = build_cache_policy("lru", 10_000_000, None)
        broker = Broker(BrokerSettings(), c.view, None, cache_policy=policy, cache_kind="lru")
        port = stack.enter_context(serve(create_app(broker)))
        http = stack.enter_context(httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=20))
        assert http.get("/status/cache").json()["query"]["hits"] == 0
        for query_id in ("cold", "warm", "warmer"):
            r = http.post("/druid/v2/", json=query_json(queryId=query_id))
            assert r.json() == [oracle(DAYS)]
        assert len(node.requests) == 1
        status = http.get("/status/cache").json()
        n = len(DAYS)
        assert status["kind"] == "lru"
        assert status["query"] == {
            "hits": 2 * n, "misses": n, "shared": 0, "puts": n, "errors": 0, "bypassed": 0, "warm": 0,
            "hitRate": 2 / 3, "inFlight": 0,
        }  # fmt: skip
        assert status["backend"]["entries"] == n and status["backend"]["bytes"] > 0
        assert status["backend"]["hits"] == 2 * n and status["backend"]["misses"] == n
        text = http.get("/metrics").text
        assert metric(text, "strata_broker_cache_segment_hits_total") == 2 * n
        assert metric(text, "strata_broker_cache_segment_misses_total") == n
        assert abs(metric(text, "strata_broker_cache_hit_rate") - 2 / 3) < 1e-9
        assert metric(text, 'strata_broker_cache_backend_entries{level="all"}') == n
        # the last server drops a segment: its entries leave the LRU with it
        c.view.remove_segment(next(iter(c.nodes)), DAYS[0].id)
        assert http.get("/status/cache").json()["backend"]["entries"] == n - 1


def test_status_cache_without_a_cache():
    with ExitStack() as stack:
        c = Cluster(stack)
        c.node(serves=DAYS)
        port = stack.enter_context(serve(create_app(Broker(BrokerSettings(), c.view, None))))
        assert httpx.get(f"http://127.0.0.1:{port}/status/cache", timeout=10).json() == {"kind": "none"}
