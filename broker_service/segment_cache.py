"""Per-segment result cache policy (Druid's CachingClusteredClient rules).

Only cacheable query types (`query.segment_cacheable`), never bySegment, and only segments served
by a historical — a realtime segment keeps its id while its data changes. Key per segment as
Druid's CacheUtil: namespace = segment id, key = [start ms int64 BE][end ms int64 BE][version]
[partition int32 BE][query cache key], with the interval clipped to the query. Values are one
segment's partial table as a compressed Arrow IPC stream.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from cachetools import LRUCache

from broker_service.cache_policy import AsyncBulkCache, CacheLookup, SharedPartial
from broker_service.cached_partials import DecodedPartials, encode_partial
from broker_service.lookup_keys import answer_version, lookup_key
from broker_service.query_memo import PerQuery
from broker_service.segment_plan import SegmentTask
from strata.query import SEGMENT_COLUMN, Query
from strata.query.aggregation_engine import concat_partials
from strata.query.small_merge import PYTHON_MERGE_MAX_ROWS, PYTHON_MERGE_MAX_TABLES
from timeline import DataSegment


def segment_cache_key(task: SegmentTask, query_key: bytes) -> bytes:
    return task.cache_key_prefix + query_key


DECODE_INLINE_BELOW = 64
KEY_MEMO_PLANS = 256  # (plan, query) pairs whose cache keys are remembered
WARM_QUERIES = 512  # query objects whose key memo the warm path finds directly (as many as bodies parsed)
# a plan remembers its last read partials only up to this many payload bytes: with the decoded
# tables, at most ~2x that per plan beyond what the caches themselves bound
READ_MEMO_PAYLOAD_BYTES = 128 * 1024
# Beyond that, a plan reading more partials than the small merge takes (thousands of segments)
# remembers them concatenated into one table, as the merge would concatenate them: 100,000 one-row
# partials cost ~100 KB of Arrow per ten thousand rows as one table against ~1 KB each as tables.
# These concatenations are bounded together by bytes.
COMBINED_MEMO_BYTES = 64 * 1024 * 1024
COMBINABLE_TYPES = frozenset({"timeseries", "topN", "groupBy"})  # their merge concatenates first
_TASK_BYTES = 300  # what an entry also keeps alive per segment: its plan's task, key and payload ref


@dataclass(eq=False, slots=True)
class _KeyMemo:
    """One plan's cache keys for one query key, and the partials its last full hit read.

    A repeat reading the same payloads (the same objects from the in-process LRU, equal bytes
    from memcached: list equality checks identity first) reuses the decoded tables as they are,
    one comparison per segment instead of a memo lookup per segment.
    """

    tasks: Sequence[SegmentTask]
    served: bytes  # which tasks are served by a historical
    keys: dict[str, Hashable]
    key_list: list[Hashable]
    read: tuple[list[bytes], list[pa.Table]] | None = None
    version: int | None = None  # the server view's version when `served` was last found current


_cache_keys = PerQuery(lambda query: query.cache_key() + query.source_key())  # a body parsed again asks again


def _query_key(query: Query) -> bytes | None:
    if not query.segment_cacheable or query.context.by_segment:
        return None
    if not (query.context.use_cache or query.context.populate_cache):
        return None
    try:
        return _cache_keys(query) + lookup_key(query)
    except NotImplementedError:
        return None


class SegmentCache:
    """The policy over any cache offering bulk async get/put keyed by `make_key(namespace, key)`."""

    def __init__(self, cache: AsyncBulkCache, make_key: Any, stats: Counter[str] | None = None):
        self.cache = cache
        self.make_key = make_key
        self.stats: Counter[str] = stats if stats is not None else Counter()
        self._flights: dict[Hashable, SharedPartial] = {}  # cache key -> partial being fetched now
        # lookups are numbered; answered flights stay findable while one that began before is open
        self._ticket = 0
        self._open: set[int] = set()
        self._landed: list[tuple[int, Hashable, SharedPartial]] = []
        self.decoded = DecodedPartials()
        self._key_memo: LRUCache[tuple[int, bytes], _KeyMemo] = LRUCache(KEY_MEMO_PLANS)
        self._combined: LRUCache[int, tuple[_KeyMemo, list[bytes], pa.Table]] = LRUCache(
            COMBINED_MEMO_BYTES, getsizeof=lambda entry: entry[2].nbytes + _TASK_BYTES * len(entry[1])
        )
        self._no_keys = _KeyMemo((), b"", {}, [])
        # query object id -> (query, plan's tasks, answer_version, its key memo): a warm repeat's
        # keys without the query key's digest and lookup fingerprints asked again (~4 µs), while
        # neither the server view nor a lookup changed
        self._warm_keys: dict[int, tuple[Query, Sequence[SegmentTask], int, _KeyMemo]] = {}

    async def _decode(self, hits: list[tuple[Hashable, bytes]]) -> list[pa.Table | None]:
        """Remembered partials cost a dict lookup each: read on the event loop. Thousands of new
        ones take milliseconds to decode: off the event loop then."""
        tables, unknown = self.decoded.recall(hits)
        if not unknown:
            return tables
        todo = [hits[i] for i in unknown]
        if len(todo) < DECODE_INLINE_BELOW:
            decoded = self.decoded.decode(todo)
        else:
            decoded = await asyncio.get_running_loop().run_in_executor(None, self.decoded.decode, todo)
        for i, table in zip(unknown, decoded, strict=True):
            tables[i] = table
        return tables

    def _cacheable(
        self, query: Query, tasks: Sequence[SegmentTask]
    ) -> tuple[bytes | None, list[SegmentTask]]:
        query_key = _query_key(query)
        if query_key is None:
            return None, []
        seen = Counter(t.segment_id for t in tasks)
        return query_key, [t for t in tasks if t.selector.is_historical and seen[t.segment_id] == 1]

    def _keys(self, query: Query, tasks: Sequence[SegmentTask], version: int | None = None) -> _KeyMemo:
        """Cache key per cacheable segment; remembered for the last plans, which the planner
        reuses while the timeline stands still (a dashboard asks the same tasks again and again).
        `version`: the server view's, which every change of a segment's servers bumps."""
        query_key = _query_key(query)
        if query_key is None:
            return self._no_keys
        memo = self._key_memo.get((id(tasks), query_key))
        if memo is not None and memo.tasks is tasks and version is not None and memo.version == version:
            return memo  # no server came or went since `served` was checked
        # a segment may gain or lose its historical copies while the plan stands: part of the key
        served = bytes([t.selector.is_historical for t in tasks])
        if memo is not None and memo.tasks is tasks and memo.served == served:
            memo.version = version
            return memo
        _, cacheable = self._cacheable(query, tasks)
        keys = {t.segment_id: self.make_key(t.segment_id, segment_cache_key(t, query_key)) for t in cacheable}
        memo = _KeyMemo(tasks, served, keys, list(keys.values()), version=version)
        self._key_memo[(id(tasks), query_key)] = memo
        return memo

    async def _all_hits(
        self, memo: _KeyMemo, payloads: list[bytes], combinable: bool
    ) -> list[pa.Table] | None:
        """Every segment's partial (payloads in the memo's key order) when all decode, else None
        (the general path then sorts hits from misses and counts the unreadable)."""
        read = memo.read
        if read is not None and read[0] == payloads:
            return read[1]
        combined = self._combined.get(id(memo))
        if combined is not None and combined[0] is memo and combined[1] == payloads:
            return [combined[2]]
        tables = await self._decode(list(zip(memo.key_list, payloads, strict=True)))
        if any(t is None for t in tables):
            return None
        decoded = [t for t in tables if t is not None]
        small = sum(map(len, payloads)) <= READ_MEMO_PAYLOAD_BYTES
        memo.read = (payloads, decoded) if small else None
        if not small and combinable and len(decoded) > PYTHON_MERGE_MAX_TABLES:
            one = await asyncio.get_running_loop().run_in_executor(None, _concatenated, decoded)
            if one is not None:
                self._combined[id(memo)] = (memo, payloads, one)
                return [one]
        return decoded

    async def lookup(self, query: Query, tasks: Sequence[SegmentTask]) -> CacheLookup:
        ticket = self._ticket
        self._ticket += 1
        self._open.add(ticket)
        try:
            return await self._lookup(query, tasks)
        finally:
            self._open.discard(ticket)
            self._sweep()

    async def _lookup(self, query: Query, tasks: Sequence[SegmentTask]) -> CacheLookup:
        if not self._available():  # the cache is down (circuit breaker open): cost nothing
            self.stats["bypassed"] += len(tasks)
            return CacheLookup(to_fetch=list(tasks))
        memo = self._keys(query, tasks)
        keys = memo.keys
        if not keys:
            return CacheLookup(to_fetch=list(tasks))
        use_cache = query.context.use_cache
        found = await self.cache.aget_many(memo.key_list) if use_cache else {}
        if len(found) == len(keys) == len(tasks):  # the warm path: every segment cached
            payloads = [found[key] for key in memo.key_list]
            every = await self._all_hits(memo, payloads, query.query_type in COMBINABLE_TYPES)
            if every is not None:
                self.stats["hits"] += len(keys)
                return CacheLookup(hits=list(every), keys=keys)
        hits = [(key, found[key]) for key in keys.values() if key in found]
        tables = await self._decode(hits)
        unreadable = {key for (key, _), table in zip(hits, tables, strict=True) if table is None}
        self.stats["hits"] += len(hits) - len(unreadable)
        self.stats["errors"] += len(unreadable)
        out = CacheLookup(hits=[t for t in tables if t is not None], keys=keys)
        for task in tasks:
            key = keys.get(task.segment_id)
            if key is not None and key in found and key not in unreadable:
                continue
            if key is None:
                out.to_fetch.append(task)
                continue
            self.stats["misses"] += 1
            flight = self._flights.get(key) if use_cache else None
            if flight is not None:
                out.waiting.append((task, flight))
                self.stats["shared"] += 1
                continue
            if use_cache:
                # checked and registered with no await in between: one leader per key
                out.leading[task.segment_id] = (key, self._flights.setdefault(key, _new_flight()))
            if query.context.populate_cache:
                out.to_populate.append(task)
            out.to_fetch.append(task)
        return out

    async def every_partial(
        self, query: Query, tasks: Sequence[SegmentTask], version: int
    ) -> list[pa.Table] | None:
        """Every planned segment's cached partial, each looked up now, or None with nothing counted
        or touched: some segment is not cached, not cacheable, or the backend offers no such read
        (`aget_all`: the LRU's in memory, memcached's one round trip, the hybrid's L1 and then L2
        for what L1 lacks). The warm path of broker_service.segment_path; `lookup` does
        everything else. `version`: the server view's."""
        get_all = getattr(self.cache, "aget_all", None)
        if get_all is None or not tasks or not query.context.use_cache or not self._available():
            return None
        memo = self._warm_memo(query, tasks, version)
        if len(memo.key_list) != len(tasks):
            return None
        combined = self._combined.get(id(memo))
        if combined is not None and combined[0] is memo:
            # read concatenated last time (thousands of partials): that path's joined rows do not
            # take one big table, so it would step aside after a lookup of every segment
            return None
        payloads: list[bytes] | None = await get_all(memo.key_list)
        if payloads is None:
            return None
        every = await self._all_hits(memo, payloads, query.query_type in COMBINABLE_TYPES)
        if every is not None:
            self.stats["hits"] += len(payloads)
        return every

    def _warm_memo(self, query: Query, tasks: Sequence[SegmentTask], version: int) -> _KeyMemo:
        stamp = answer_version(version)  # the view's version and the lookups' generation
        known = self._warm_keys.get(id(query))
        if known is not None and known[0] is query and known[1] is tasks and known[2] == stamp:
            return known[3]
        memo = self._keys(query, tasks, version)
        if len(self._warm_keys) >= WARM_QUERIES:
            self._warm_keys.clear()
        self._warm_keys[id(query)] = (query, tasks, stamp, memo)
        return memo

    async def complete(
        self, query: Query, lookup: CacheLookup, fetched: Sequence[SegmentTask], partials: Sequence[pa.Table]
    ) -> None:
        """Hand each fetched partial to the queries waiting for it, then store the cacheable ones."""
        wanted = {t.segment_id for t in fetched} & (
            set(lookup.leading) | {t.segment_id for t in lookup.to_populate}
        )
        parts = split_by_segment(partials, wanted)
        landed: list[tuple[Hashable, SharedPartial]] = []
        for segment_id, part in parts.items():
            leading = lookup.leading.pop(segment_id, None)
            if leading is not None and not leading[1].done():
                leading[1].set_result(part)
                landed.append(leading)
        self.release(lookup)
        try:
            populate = [t for t in lookup.to_populate if t.segment_id in parts]
            await self._populate(query, populate, parts, lookup.keys)
        finally:
            # the flights stay findable (already answered) until the cache holds the partials, and
            # past it while a lookup that began before is still open: its cache read may have
            # left before the store and come back after, and would then miss both and fetch again
            self._landed += [(self._ticket, key, future) for key, future in landed]
            self._sweep()

    def _sweep(self) -> None:
        """Forget the answered flights no open lookup began before."""
        oldest = min(self._open, default=self._ticket)
        kept = []
        for landed_at, key, future in self._landed:
            if oldest < landed_at:
                kept.append((landed_at, key, future))
            else:
                self._forget_flight(key, future)
        self._landed = kept

    async def _populate(
        self,
        query: Query,
        tasks: Sequence[SegmentTask],
        parts: dict[str, pa.Table],
        keys: dict[str, Hashable],
    ) -> None:
        """Store the partials under the key objects the lookup used: a repeat's lookups then find
        them by identity, without comparing keys field by field."""
        query_key = _query_key(query)
        if not tasks or query_key is None:
            return
        entries = [
            (
                keys.get(t.segment_id) or self.make_key(t.segment_id, segment_cache_key(t, query_key)),
                parts[t.segment_id],
            )
            for t in tasks
        ]
        items = {key: encode_partial(part) for key, part in entries}
        await self.cache.aput_many(items)
        self.decoded.remember([(key, items[key], part) for key, part in entries])
        self.stats["puts"] += len(items)

    def _available(self) -> bool:
        available = getattr(self.cache, "available", None)
        return available is None or bool(available())

    def release(self, lookup: CacheLookup) -> None:
        """Flights this query led but could not complete: waiters fetch those segments themselves."""
        for key, future in lookup.leading.values():
            self._land(key, future, None)
        lookup.leading.clear()

    def _forget_flight(self, key: Hashable, future: SharedPartial) -> None:
        if self._flights.get(key) is future:
            del self._flights[key]

    def _land(self, key: Hashable, future: SharedPartial, part: pa.Table | None) -> None:
        self._forget_flight(key, future)
        if not future.done():
            future.set_result(part)

    def forget_segment(self, segment: DataSegment) -> None:
        """The last server dropped the segment: free its entries (memcached lets them age out)."""
        close_namespace = getattr(self.cache, "close_namespace", None)
        if close_namespace is not None:
            close_namespace(segment.id)

    @property
    def flights(self) -> int:
        """Partials being fetched now (answered ones kept for open lookups are not counted)."""
        return sum(not f.done() for f in self._flights.values())


def _concatenated(tables: Sequence[pa.Table]) -> pa.Table | None:
    """The partials as the merge concatenates them (the empty ones left out, as it leaves them),
    when that is more rows than the small merge reads as Python values (so the merge of the one
    table takes the path the merge of the many took, and gives the same answer)."""
    rows = [t for t in tables if t.num_rows]
    if not rows:
        return None
    one = concat_partials(rows)
    return one if one.num_rows > PYTHON_MERGE_MAX_ROWS else None


def _new_flight() -> SharedPartial:
    return asyncio.get_running_loop().create_future()


def split_by_segment(partials: Sequence[pa.Table], segment_ids: set[str]) -> dict[str, pa.Table]:
    """Each wanted segment's rows (possibly none) of the fetched partial tables, in their order.

    One stable sort by segment and a slice per run: a filter per segment read the whole table once
    per segment, which over 100,000 segments held the event loop for minutes."""
    if not segment_ids or not partials:
        return {}
    table = pa.concat_tables(partials, promote_options="permissive")
    if SEGMENT_COLUMN not in table.column_names:
        return {}
    if table[SEGMENT_COLUMN].null_count:
        table = table.filter(pc.is_valid(table[SEGMENT_COLUMN]))
    table = table.take(pc.sort_indices(table[SEGMENT_COLUMN]))
    labels = table[SEGMENT_COLUMN].combine_chunks().dictionary_encode()
    codes = labels.indices.to_numpy(zero_copy_only=False)
    names = labels.dictionary.to_pylist()
    starts = [0, *(np.flatnonzero(np.diff(codes)) + 1).tolist()]
    ends = [*starts[1:], len(codes)] if len(codes) else []
    empty = table.slice(0, 0)
    out = dict.fromkeys(segment_ids, empty)
    for start, end in zip(starts, ends, strict=False):
        name = names[codes[start]]
        if name in out:
            out[name] = table.slice(start, end - start)
    return out


def build_cache_policy(kind: str, size_bytes: int, memcached: str | None) -> SegmentCache:
    """A policy over the `cache` package's backend of that kind."""
    from broker_service.errors import BrokerConfigError
    from cache import CacheKey as cache_key
    from cache import create_cache

    servers = [s for s in (memcached or "").split(",") if s.strip()]
    try:
        backend = create_cache(kind, size_bytes, servers)
    except ValueError as e:
        raise BrokerConfigError(f"--cache {kind}: {e}") from None
    return SegmentCache(backend, cache_key)
