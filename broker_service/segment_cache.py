"""Per-segment result cache policy (Druid's CachingClusteredClient rules).

Only cacheable query types (`query.segment_cacheable`), never bySegment, and only segments served
by a historical — a realtime segment keeps its id while its data changes. Key per segment as
Druid's CacheUtil: namespace = segment id, key = [start ms int64 BE][end ms int64 BE][version]
[partition int32 BE][query cache key], with the interval clipped to the query. Values are one
segment's partial table as a compressed Arrow IPC stream.
"""

from __future__ import annotations

import struct
from collections import Counter
from collections.abc import Sequence
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.compute as pc

from broker_service.cache_policy import CacheLookup
from broker_service.segment_plan import SegmentTask
from query import SEGMENT_COLUMN, Query


class AsyncBulkCache(Protocol):
    async def aget_many(self, keys: Sequence[Any]) -> dict[Any, bytes]: ...

    async def aput_many(self, items: dict[Any, bytes]) -> None: ...


def segment_cache_key(task: SegmentTask, query_key: bytes) -> bytes:
    d = task.descriptor
    return (
        struct.pack(">qq", d.interval.start, d.interval.end)
        + d.version.encode()
        + struct.pack(">i", d.partition)
        + query_key
    )


def encode_partial(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    options = pa.ipc.IpcWriteOptions(compression="zstd")
    with pa.ipc.new_stream(sink, table.schema, options=options) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def decode_partial(payload: bytes) -> pa.Table:
    with pa.ipc.open_stream(pa.py_buffer(payload)) as reader:
        return reader.read_all()


def _query_key(query: Query) -> bytes | None:
    if not query.segment_cacheable or query.context.by_segment:
        return None
    if not (query.context.use_cache or query.context.populate_cache):
        return None
    try:
        return query.cache_key()
    except NotImplementedError:
        return None


class SegmentCache:
    """The policy over any cache offering bulk async get/put keyed by `make_key(namespace, key)`."""

    def __init__(self, cache: AsyncBulkCache, make_key: Any, stats: Counter[str] | None = None):
        self.cache = cache
        self.make_key = make_key
        self.stats: Counter[str] = stats if stats is not None else Counter()

    def _cacheable(
        self, query: Query, tasks: Sequence[SegmentTask]
    ) -> tuple[bytes | None, list[SegmentTask]]:
        query_key = _query_key(query)
        if query_key is None:
            return None, []
        seen = Counter(t.segment_id for t in tasks)
        return query_key, [t for t in tasks if t.selector.is_historical and seen[t.segment_id] == 1]

    async def lookup(self, query: Query, tasks: Sequence[SegmentTask]) -> CacheLookup:
        query_key, cacheable = self._cacheable(query, tasks)
        if query_key is None or not cacheable:
            return CacheLookup(to_fetch=list(tasks))
        keys = {t.segment_id: self.make_key(t.segment_id, segment_cache_key(t, query_key)) for t in cacheable}
        found = await self.cache.aget_many(list(keys.values())) if query.context.use_cache else {}
        out = CacheLookup()
        cacheable_ids = set(keys)
        for task in tasks:
            payload = found.get(keys[task.segment_id]) if task.segment_id in keys else None
            if payload is not None:
                try:
                    out.hits.append(decode_partial(payload))
                    self.stats["hits"] += 1
                    continue
                except (pa.ArrowInvalid, OSError):
                    self.stats["errors"] += 1
            if task.segment_id in cacheable_ids:
                self.stats["misses"] += 1
                if query.context.populate_cache:
                    out.to_populate.append(task)
            out.to_fetch.append(task)
        return out

    async def populate(
        self, query: Query, tasks: Sequence[SegmentTask], partials: Sequence[pa.Table]
    ) -> None:
        query_key = _query_key(query)
        if query_key is None or not tasks or not partials:
            return
        table = pa.concat_tables(partials, promote_options="permissive")
        if SEGMENT_COLUMN not in table.column_names:
            return
        items = {}
        for task in tasks:
            part = table.filter(pc.equal(table[SEGMENT_COLUMN], task.segment_id))
            items[self.make_key(task.segment_id, segment_cache_key(task, query_key))] = encode_partial(part)
        await self.cache.aput_many(items)
        self.stats["puts"] += len(items)


def build_cache_policy(kind: str, size_bytes: int, memcached: str | None) -> SegmentCache:
    """A policy over the `cache` package's backend of that kind."""
    from broker_service.build import BrokerConfigError
    from cache import CacheKey as cache_key
    from cache import create_cache

    servers = [s for s in (memcached or "").split(",") if s.strip()]
    try:
        backend = create_cache(kind, size_bytes, servers)
    except ValueError as e:
        raise BrokerConfigError(f"--cache {kind}: {e}") from None
    return SegmentCache(backend, cache_key)
