"""The native endpoint's fast path (remembered whole answers) against the full path it stands for.

A real uvicorn server with fake data nodes behind it; answers checked against the plain-Python
oracle of the fake nodes' values, and the fast answer against the full path's bytes and headers.
"""

from __future__ import annotations

from contextlib import ExitStack

import httpx
import orjson
import pytest

from broker_service.answer_memo import MAX_BODY_BYTES, AnswerMemo, MemoAnswer
from broker_service.app import create_app
from broker_service.broker import Broker, BrokerSettings
from broker_service.fast_path import GUARD_KEY, _eligible
from broker_service.result_cache import ResultLevelCache
from broker_service.segment_cache import build_cache_policy
from cache import CacheKey
from strata.query.base import register
from tests.broker.helpers import SumQuery, serve
from tests.broker.test_query_runner import DAYS, WEEK, Cluster, oracle

register(SumQuery)

_VARYING = {"x-druid-query-id", "date"}


def body_of(**context: object) -> bytes:
    query = {"queryType": "testSum", "dataSource": "wiki", "intervals": [WEEK], "context": context}
    return orjson.dumps(query)


def start(stack: ExitStack, c: Cluster, cache: bool = True) -> tuple[httpx.Client, Broker]:
    policy = build_cache_policy("lru", 64 * 1024 * 1024, None) if cache else None
    results = ResultLevelCache(policy.cache, CacheKey) if policy is not None else None
    broker = Broker(BrokerSettings(), c.view, None, cache_policy=policy, cache_kind="lru" if cache else "none",
                    result_cache=results)  # fmt: skip
    port = stack.enter_context(serve(create_app(broker)))
    return stack.enter_context(httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=20)), broker


def fixed_headers(r: httpx.Response) -> dict[str, str]:
    return {k: v for k, v in r.headers.items() if k not in _VARYING}


def test_a_remembered_answer_is_the_full_paths_answer_byte_for_byte():
    with ExitStack() as stack:
        c = Cluster(stack)
        _, node = c.node(serves=DAYS)
        http, broker = start(stack, c)
        full = http.post("/druid/v2/", content=body_of())
        assert full.status_code == 200 and full.json() == [oracle(DAYS)]
        assert broker.answer_memo is not None and len(broker.answer_memo) == 1
        fast = [http.post("/druid/v2/", content=body_of()) for _ in range(3)]
        assert broker.answer_memo.hits == 3
        assert len(node.requests) == 1  # the data node was asked once
        for r in fast:
            assert (r.status_code, r.content, fixed_headers(r)) == (200, full.content, fixed_headers(full))
        ids = {r.headers["X-Druid-Query-Id"] for r in [full, *fast]}
        assert len(ids) == 4  # a fresh id per request, as the full path gives
        named = [http.post("/druid/v2", content=body_of(queryId="dash")) for _ in range(2)]
        assert [r.headers["X-Druid-Query-Id"] for r in named] == ["dash", "dash"]
        assert named[1].content == full.content
        status = http.get("/status/cache").json()
        assert status["resultLevel"]["hits"] >= 4  # memo hits count as whole-answer hits


def test_a_change_of_segments_makes_the_remembered_answer_stale():
    with ExitStack() as stack:
        c = Cluster(stack)
        server, _ = c.node(serves=DAYS, announces=DAYS[:3])
        http, broker = start(stack, c)
        assert http.post("/druid/v2/", content=body_of()).json() == [oracle(DAYS[:3])]
        assert http.post("/druid/v2/", content=body_of()).json() == [oracle(DAYS[:3])]
        c.view.add_segment(server.name, DAYS[3])
        assert http.post("/druid/v2/", content=body_of()).json() == [oracle(DAYS[:4])]
        c.view.remove_segment(server.name, DAYS[0].id)
        assert http.post("/druid/v2/", content=body_of()).json() == [oracle(DAYS[1:4])]
        assert broker.answer_memo is not None and broker.answer_memo.hits == 1


@pytest.mark.parametrize(
    ("body", "status", "error"),
    [
        (b"{not json", 400, "Json parse failed"),
        (b'{"queryType":"testSum","dataSource":"wiki"}', 400, "druidException"),
    ],
)
def test_errors_keep_druids_bodies(body: bytes, status: int, error: str):
    with ExitStack() as stack:
        c = Cluster(stack)
        c.node(serves=DAYS)
        http, broker = start(stack, c)
        for _ in range(2):
            r = http.post("/druid/v2/", content=body)
            assert r.status_code == status and r.json()["error"] == error
        assert broker.answer_memo is not None and len(broker.answer_memo) == 0


def test_what_the_fast_path_leaves_to_the_full_path():
    with ExitStack() as stack:
        c = Cluster(stack)
        c.node(serves=DAYS)
        http, broker = start(stack, c)
        first = http.post("/druid/v2/", content=body_of())
        pretty = http.post("/druid/v2/?pretty", content=body_of())
        assert b"\n" in pretty.content and pretty.json() == first.json()
        etag = first.headers["ETag"]
        assert http.post("/druid/v2/", content=body_of(), headers={"If-None-Match": etag}).status_code == 304
        uncached = http.post("/druid/v2/", content=body_of(useResultLevelCache=False))
        assert uncached.json() == first.json()
        long = body_of(padding="x" * (MAX_BODY_BYTES + 1))
        assert [http.post("/druid/v2/", content=long).json() for _ in range(2)] == [first.json()] * 2
        assert broker.answer_memo is not None and broker.answer_memo.hits == 0
        assert len(broker.answer_memo) == 1  # the first body only


def test_without_a_cache_there_is_no_memo():
    with ExitStack() as stack:
        c = Cluster(stack)
        c.node(serves=DAYS)
        http, broker = start(stack, c, cache=False)
        assert [http.post("/druid/v2/", content=body_of()).json() for _ in range(2)] == [[oracle(DAYS)]] * 2
        assert broker.answer_memo is None


def test_only_plain_posts_to_the_native_endpoint_are_eligible():
    base = {"type": "http", "method": "POST", "path": "/druid/v2/", "query_string": b"", "headers": []}
    assert _eligible(base)
    assert _eligible({**base, "path": "/druid/v2"})
    assert not _eligible({**base, GUARD_KEY: object()})  # security on: the handler authorizes
    assert not _eligible({**base, "method": "GET"})
    assert not _eligible({**base, "path": "/druid/v2/sql/"})
    assert not _eligible({**base, "query_string": b"pretty"})
    assert not _eligible({**base, "headers": [(b"if-none-match", b'"x"')]})


def answer(version: int, body: bytes = b"[]") -> MemoAnswer:
    return MemoAnswer(version, body, ((b"content-type", b"application/json"),), None, "wiki", "timeseries")


def test_memo_entries_go_stale_with_the_version_and_stay_bounded():
    memo = AnswerMemo(max_bytes=4096)
    memo.put(b"q", answer(1))
    assert memo.get(b"q", 1) is not None
    assert memo.get(b"q", 2) is None and len(memo) == 0  # stale: dropped
    memo.put(b"big", answer(1, b"x" * 5000))
    assert len(memo) == 0  # larger than the whole memo
    memo.put(b"x" * (MAX_BODY_BYTES + 1), answer(1))
    assert len(memo) == 0
    for i in range(100):
        memo.put(str(i).encode(), answer(1, b"y" * 100))
    assert 0 < len(memo) < 100
