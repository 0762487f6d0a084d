"""Whole-query results, reused while the query would read exactly the same segments.

Druid's result-level cache: the value is the finished JSON answer, stored with an ETag that
hashes the set of segments the query read (ids and intervals clipped to the query). A later
identical query plans its segments first; if the ETag is unchanged — no new version, no segment
added, dropped or moved out of a historical — the stored bytes are the answer, with no merge and
no serialization. Answers touching a segment only a real-time node serves are never stored (its
id stays the same while its data grows), nor partial answers. Clients may send the ETag back as
`If-None-Match` and get `304 Not Modified`.
"""

from __future__ import annotations

import struct
from typing import Any

import orjson

from broker_service.cache_policy import AsyncBulkCache
from broker_service.lookup_keys import lookup_key
from broker_service.segment_plan import SegmentPlan
from strata.query import Query

# context keys that change how a query runs, never what it answers
_RUN_ONLY_CONTEXT = frozenset({
    "queryId", "sqlQueryId", "timeout", "priority", "lane", "useCache", "populateCache",
    "useResultLevelCache", "populateResultLevelCache", "numRetriesOnMissingSegments", "maxSubqueryRows",
    "maxSubqueryBytes",
})  # fmt: skip


def result_key(query: Query) -> bytes:
    body = query.to_json()
    body["context"] = {k: v for k, v in body.get("context", {}).items() if k not in _RUN_ONLY_CONTEXT}
    options = orjson.OPT_SORT_KEYS | orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS
    return orjson.dumps(body, option=options) + lookup_key(query)


def segments_etag(plan: SegmentPlan) -> str | None:
    """A digest of the segments `plan` reads; None when a real-time segment is among them."""
    if not all(task.selector.is_historical for task in plan.tasks):
        return None
    return plan.segments_digest()


def result_cacheable(query: Query) -> bool:
    ctx = query.context
    return (
        query.query_type != "scan"  # unbounded answers; Druid does not cache scan either
        and not ctx.by_segment
        and ctx.uncovered_intervals_limit <= 0
        and (ctx.use_result_level_cache or ctx.populate_result_level_cache)
    )


class ResultLevelCache:
    def __init__(self, cache: AsyncBulkCache, make_key: Any, max_entry_bytes: int = 1_000_000):
        self.cache = cache
        self.make_key = make_key
        self.max_entry_bytes = max_entry_bytes
        self.hits = 0
        self.misses = 0

    def _key(self, query: Query) -> Any:
        return self.make_key(f"result:{query.data_source}", result_key(query))

    async def get(self, query: Query, etag: str) -> bytes | None:
        key = self._key(query)
        value = (await self.cache.aget_many([key])).get(key)
        tag = etag.encode()
        if value is not None and value[:2] == struct.pack(">H", len(tag)) and value[2 : 2 + len(tag)] == tag:
            self.hits += 1
            return value[2 + len(tag) :]
        self.misses += 1
        return None

    async def put(self, query: Query, etag: str, body: bytes) -> None:
        tag = etag.encode()
        if len(body) + len(tag) + 2 > self.max_entry_bytes:
            return
        await self.cache.aput_many({self._key(query): struct.pack(">H", len(tag)) + tag + body})
