"""Thousands of cached partials remembered as one concatenated table: the same answer as merging
them one by one, and as plain Python sums over the partials' rows (the oracle)."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Hashable
from typing import cast

import pyarrow as pa

from broker_service.cached_partials import encode_partial
from broker_service.segment_cache import SegmentCache, build_cache_policy
from broker_service.segment_plan import SegmentTask
from broker_service.server_view import ServerSelector
from strata.discovery.server_metadata import ServerMetadata
from strata.query import SEGMENT_COLUMN, Query, parse_query
from strata.query.aggregation_engine import BUCKET, agg_col
from tests.broker.helpers import segment
from tests.broker.test_segment_cache import DictCache, Key
from timeline import SegmentDescriptor, format_instant

HOUR = 3_600_000
START = 1_420_070_400_000  # 2015-01-01
SEGMENTS = 600  # beyond the small merge's 256 partials
BUCKETS = 8  # rows per partial: 4,800 rows, beyond the small merge's 4,096


def query(granularity: str) -> Query:
    return parse_query({
        "queryType": "timeseries", "dataSource": "wiki", "granularity": granularity,
        "intervals": ["2015-01-01/2016-01-01"],
        "aggregations": [{"type": "longSum", "name": "n", "fieldName": "n"},
                         {"type": "doubleSum", "name": "x", "fieldName": "x"}],
    })  # fmt: skip


async def twice(policy: SegmentCache, q: Query, plan: list[SegmentTask]) -> tuple[list[pa.Table], ...]:
    """Two lookups on one event loop: what each read from the cache."""
    return (await policy.lookup(q, plan)).hits, (await policy.lookup(q, plan)).hits


def tasks() -> list[SegmentTask]:
    server = ServerMetadata("h1:8083", "h1:8083")
    out = []
    for i in range(SEGMENTS):
        start = START + i * BUCKETS * HOUR
        seg = segment(interval=f"{format_instant(start)}/{format_instant(start + BUCKETS * HOUR)}")
        selector = ServerSelector(seg)
        selector.set_server(server, seg)
        out.append(SegmentTask(selector, SegmentDescriptor(seg.interval, seg.version, 0)))
    return out


def partial(task: SegmentTask, i: int) -> pa.Table:
    start = task.descriptor.interval.start
    return pa.table({
        SEGMENT_COLUMN: [task.segment_id] * BUCKETS,
        BUCKET: pa.array([start + b * HOUR for b in range(BUCKETS)], pa.int64()),
        agg_col(0): pa.array([i * 10 + b for b in range(BUCKETS)], pa.int64()),
        agg_col(1): pa.array([(i % 7) * 0.1 + b / 3 for b in range(BUCKETS)], pa.float64()),
    })  # fmt: skip


def filled(
    q: Query, plan: list[SegmentTask], parts: list[pa.Table]
) -> tuple[SegmentCache, DictCache, dict[str, Hashable]]:
    """A policy over a cache holding each task's partial under the key the policy looks up."""
    cache = DictCache()
    policy = SegmentCache(cache, Key)
    cold = asyncio.run(policy.lookup(q, plan))
    policy.release(cold)
    cache.data.update(
        {cast(Key, cold.keys[t.segment_id]): encode_partial(p) for t, p in zip(plan, parts, strict=True)}
    )
    return policy, cache, cold.keys


def test_a_repeat_over_thousands_of_partials_answers_as_the_partials_do() -> None:
    for granularity in ("hour", "all"):
        q = query(granularity)
        plan = tasks()
        parts = [partial(t, i) for i, t in enumerate(plan)]
        policy, _, _ = filled(q, plan, parts)
        first, second = asyncio.run(twice(policy, q, plan))
        assert len(first) == 1 and second[0] is first[0]  # remembered, concatenated
        assert policy.stats["hits"] == 2 * SEGMENTS
        assert q.finalize(q.merge(first)) == q.finalize(q.merge(parts))
        sums: dict[int, list[float]] = {}
        for p in parts:
            for row in p.to_pylist():
                key = row[BUCKET] if granularity == "hour" else START
                total = sums.setdefault(key, [0, 0.0])
                total[0] += row[agg_col(0)]
                total[1] += row[agg_col(1)]
        answer = q.finalize(q.merge(first))
        assert [r["timestamp"] for r in answer] == [format_instant(t) for t in sorted(sums)]
        for r in answer:
            n, x = sums[_millis(r["timestamp"])]
            assert r["result"]["n"] == n and abs(r["result"]["x"] - x) < 1e-6


def test_a_changed_partial_is_read_again() -> None:
    q = query("all")
    plan = tasks()
    parts = [partial(t, i) for i, t in enumerate(plan)]
    policy, cache, keys = filled(q, plan, parts)
    before = asyncio.run(policy.lookup(q, plan)).hits
    parts[5] = parts[5].set_column(2, agg_col(0), pa.array([1_000_000] * BUCKETS, pa.int64()))
    cache.data[cast(Key, keys[plan[5].segment_id])] = encode_partial(parts[5])
    after = asyncio.run(policy.lookup(q, plan)).hits
    assert after[0] is not before[0]
    assert q.finalize(q.merge(after)) == q.finalize(q.merge(parts))


def _millis(text: str) -> int:
    from timeline import parse_instant

    return parse_instant(text)


def test_the_asgi_warm_path_steps_aside_for_a_plan_read_concatenated() -> None:
    """Its joined rows take no concatenated table: once a plan's partials were read concatenated,
    it steps aside before looking every segment up, and the full path reads the remembered table."""
    q = query("all")
    plan = tasks()
    parts = [partial(t, i) for i, t in enumerate(plan)]
    policy = build_cache_policy("lru", 1 << 28, None)

    async def scenario() -> tuple[list[pa.Table] | None, list[pa.Table] | None, list[pa.Table]]:
        cold = await policy.lookup(q, plan)
        policy.release(cold)
        await policy.cache.aput_many(
            {cold.keys[t.segment_id]: encode_partial(p) for t, p in zip(plan, parts, strict=True)}
        )
        # the server view's version where every_partial takes it (a plan reused while it holds)
        version = (0,) if "version" in inspect.signature(policy.every_partial).parameters else ()
        first = await policy.every_partial(q, plan, *version)
        second = await policy.every_partial(q, plan, *version)
        return first, second, (await policy.lookup(q, plan)).hits

    first, second, hits = asyncio.run(scenario())
    assert first is not None and len(first) == 1 and second is None
    assert hits[0] is first[0]
    assert q.finalize(q.merge(hits)) == q.finalize(q.merge(parts))
