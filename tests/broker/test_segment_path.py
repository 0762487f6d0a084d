"""The per-segment warm path (broker_service.segment_path) against the full path, on every cache kind.

A broker whose view announces 24 hourly segments on a historical that is never asked (every
partial is in the cache): the warm path's answer must be the full path's (the query runner over
the same cache) byte for byte, and both the plain-Python sums over the cached partials' rows;
a partial replaced under its key between two requests is read anew (never the last answer
again), and a partial gone sends the query to the full path with nothing counted. memcached and
the hybrid's L2 are real memcached processes (tests/conftest.py).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator, MutableMapping
from contextlib import contextmanager
from typing import Any

import orjson
import pyarrow as pa
import pytest

from broker_service.broker import Broker, BrokerSettings
from broker_service.cached_partials import encode_partial
from broker_service.segment_cache import build_cache_policy
from broker_service.segment_path import SegmentPath
from broker_service.server_view import BrokerServerView
from cache import HybridCache
from strata.discovery.server_metadata import ServerMetadata
from strata.query import SEGMENT_COLUMN, Query
from strata.query.aggregation_engine import BUCKET, agg_col
from tests.broker.helpers import segment
from timeline import format_instant

HOUR = 3_600_000
START = 1_442_016_000_000  # 2015-09-12
HOURS = 24

KINDS = ["lru", pytest.param("hybrid", marks=pytest.mark.integration),
         pytest.param("memcached", marks=pytest.mark.integration)]  # fmt: skip


def body_of(data_source: str) -> bytes:
    return orjson.dumps({
        "queryType": "timeseries", "dataSource": data_source, "granularity": "hour",
        "intervals": [f"{format_instant(START)}/{format_instant(START + HOURS * HOUR)}"],
        "aggregations": [{"type": "longSum", "name": "n", "fieldName": "n"},
                         {"type": "doubleSum", "name": "x", "fieldName": "x"}],
        "postAggregations": [{"type": "arithmetic", "name": "half", "fn": "/",
                              "fields": [{"type": "fieldAccess", "fieldName": "n"},
                                         {"type": "constant", "value": 2}]}],
        "context": {"useResultLevelCache": False, "populateResultLevelCache": False},
    })  # fmt: skip


def partial(segment_id: str, hour: int, n: int) -> pa.Table:
    """One segment's cached partial: its one hourly bucket's sums."""
    return pa.table({
        SEGMENT_COLUMN: [segment_id],
        BUCKET: pa.array([START + hour * HOUR], pa.int64()),
        agg_col(0): pa.array([n], pa.int64()),
        agg_col(1): pa.array([n / 4], pa.float64()),
    })  # fmt: skip


def oracle(parts: list[pa.Table]) -> list[dict[str, Any]]:
    """Plain Python over the partials' rows: one row per hour, sums and the post-aggregator."""
    rows = sorted((row for p in parts for row in p.to_pylist()), key=lambda r: r[BUCKET])
    return [{"timestamp": format_instant(r[BUCKET]),
             "result": {"n": r[agg_col(0)], "x": r[agg_col(1)], "half": r[agg_col(0)] / 2}}
            for r in rows]  # fmt: skip


class Warm:
    """A broker over one cache kind, its warm path, and the cached partials of one query."""

    def __init__(self, kind: str, memcached: str | None):
        self.data_source = "warm" + uuid.uuid4().hex[:8]  # keys of its own on a shared memcached
        view = BrokerServerView()
        server = self.server = ServerMetadata("127.0.0.1:9", "127.0.0.1:9")  # never asked: nothing listens
        view.add_server(server)
        self.segments = []
        for h in range(HOURS):
            start = START + h * HOUR
            seg = segment(self.data_source, f"{format_instant(start)}/{format_instant(start + HOUR)}")
            view.add_segment(server.name, seg)
            self.segments.append(seg)
        self.policy = build_cache_policy(kind, 1 << 26, memcached)
        self.broker = Broker(BrokerSettings(), view, None, cache_policy=self.policy, cache_kind=kind)
        self.path = SegmentPath(self.broker, self.policy)
        self.body = body_of(self.data_source)
        self.query: Query = self.broker.parsed_bodies.parse(self.body, 1 << 20)
        self.parts = [partial(s.id, h, 100 + h) for h, s in enumerate(self.segments)]
        self.keys: dict[str, Any] = {}

    async def fill(self) -> None:
        tasks = self.broker.runner.planner.plan(self.query).tasks
        cold = await self.policy.lookup(self.query, tasks)
        self.policy.release(cold)
        self.keys = cold.keys
        await self.policy.cache.aput_many({self.keys[p[SEGMENT_COLUMN][0].as_py()]: encode_partial(p)
                                           for p in self.parts})  # fmt: skip

    async def replace(self, hour: int, n: int) -> None:
        """A new partial under the same key, as another writer would store it."""
        self.parts[hour] = partial(self.segments[hour].id, hour, n)
        await self.policy.cache.aput_many(
            {self.keys[self.segments[hour].id]: encode_partial(self.parts[hour])}
        )

    async def warm(self) -> bytes | None:
        """The warm path's answer (None: it stepped aside), its head checked as the full path's."""
        sent: list[MutableMapping[str, Any]] = []

        async def send(message: MutableMapping[str, Any]) -> None:
            sent.append(message)

        if not await self.path.answer(self.body, send):
            assert not sent
            return None
        start, body = sent
        assert start["status"] == 200
        head = dict(start["headers"])
        assert head[b"content-type"] == b"application/json"
        assert head[b"content-length"] == str(len(body["body"])).encode()
        answer: bytes = body["body"]
        return answer

    async def full(self) -> bytes:
        result = await self.broker.runner.run(self.query)
        assert result.body is not None
        return result.body


@pytest.fixture
def memcached_address(request: pytest.FixtureRequest) -> str | None:
    if request.node.callspec.params["kind"] == "lru":
        return None
    server = request.getfixturevalue("memcached_server")
    address: str = server.address
    return address


@contextmanager
def warm_broker(kind: str, memcached: str | None) -> Iterator[Warm]:
    w = Warm(kind, memcached)
    try:
        yield w
    finally:
        asyncio.run(w.broker.stop())
        w.policy.cache.close()  # type: ignore[attr-defined]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", KINDS)
def test_warm_answers_are_the_full_paths_and_follow_a_replaced_partial(
    kind: str, memcached_address: str | None
):
    with warm_broker(kind, memcached_address) as w:

        async def scenario() -> None:
            assert await w.warm() is None  # nothing cached yet: the full path's turn
            await w.fill()
            full = await w.full()
            assert orjson.loads(full) == oracle(w.parts)
            warm = await w.warm()
            assert warm == full
            assert await w.warm() == full  # the same partials again: the same bytes
            await w.replace(5, 7_777)
            changed = await w.warm()
            assert changed is not None and changed != full
            assert changed == await w.full()
            assert orjson.loads(changed) == oracle(w.parts)
            w.broker.view.remove_segment(w.server.name, w.segments[0].id)  # a new plan: 23 segments
            fewer = await w.warm()
            assert fewer is not None and orjson.loads(fewer) == oracle(w.parts[1:])
            assert fewer == await w.full()

        asyncio.run(scenario())
        assert w.policy.stats["warm"] == 4


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", KINDS)
def test_a_partial_gone_steps_aside_with_nothing_counted(kind: str, memcached_address: str | None):
    with warm_broker(kind, memcached_address) as w:

        async def scenario() -> None:
            await w.fill()
            assert await w.warm() is not None
            gone = w.keys[w.segments[3].id]
            cache: Any = w.policy.cache
            if kind == "lru":
                cache.close_namespace(gone.namespace)
            else:  # memcached lets entries age out: deleted here as its LRU would evict one
                remote = cache.l2 if isinstance(cache, HybridCache) else cache
                server, mkey, _ = remote._place(gone)
                remote._servers[server].client.delete(mkey)
                if isinstance(cache, HybridCache):
                    cache.l1.close_namespace(gone.namespace)
            stats, backend = dict(w.policy.stats), cache.stats()
            assert await w.warm() is None
            assert dict(w.policy.stats) == stats and cache.stats() == backend

        asyncio.run(scenario())


@pytest.mark.integration
@pytest.mark.timeout(60)
def test_the_hybrid_reads_l2_only_for_what_l1_lacks(memcached_server: Any) -> None:
    with warm_broker("hybrid", memcached_server.address) as w:
        cache = w.policy.cache
        assert isinstance(cache, HybridCache)

        async def scenario() -> None:
            await w.fill()
            full = await w.full()  # every partial from L1
            levels, pair = cache.level_stats(), cache.stats().hits
            assert await w.warm() == full
            after = cache.level_stats()
            assert after["l1"].hits == levels["l1"].hits + HOURS and after["l2"].hits == levels["l2"].hits
            for seg in w.segments[:10]:  # L1 loses ten: those ten, and only they, come from L2
                cache.l1.close_namespace(w.keys[seg.id].namespace)
            assert await w.warm() == full
            final = cache.level_stats()
            assert final["l2"].hits == after["l2"].hits + 10
            assert final["l1"].hits == after["l1"].hits + HOURS - 10
            assert final["l1"].misses == after["l1"].misses + 10
            assert final["l1"].entries == HOURS  # promoted back
            assert cache.stats().hits == pair + 2 * HOURS  # the pair: every key found, each time

        asyncio.run(scenario())
