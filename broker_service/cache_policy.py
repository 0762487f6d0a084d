"""The seam for the per-segment result cache, between segment planning and scatter.

A policy splits the planned segments into cached partials, partials another query is fetching
right now (single flight: a burst of identical dashboards costs one fetch per segment), and
segments to fetch. Afterwards `complete` stores what the data nodes returned and hands it to the
queries waiting for it; `release` runs whatever happened, so a failed or cancelled query never
leaves others waiting. `NoSegmentCache` is the policy without a cache.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import pyarrow as pa

from broker_service.segment_plan import SegmentTask
from strata.query import Query

SharedPartial = asyncio.Future[pa.Table | None]  # None: the fetching query could not read it


@dataclass
class CacheLookup:
    hits: list[pa.Table] = field(default_factory=list)  # cached partials, one per hit segment
    to_fetch: list[SegmentTask] = field(default_factory=list)
    to_populate: list[SegmentTask] = field(default_factory=list)  # misses to store once fetched
    # misses another query is already fetching: wait for its partial instead of fetching again
    waiting: list[tuple[SegmentTask, SharedPartial]] = field(default_factory=list)
    # misses this query fetches for everyone: segment id -> (flight key, future to resolve)
    leading: dict[str, tuple[Hashable, SharedPartial]] = field(default_factory=dict)
    # segment id -> cache key, the very key objects looked up (so those stored are identical ones)
    keys: dict[str, Hashable] = field(default_factory=dict)


class AsyncBulkCache(Protocol):
    """What the broker needs of a cache backend (`cache.ResultCache` provides it)."""

    async def aget_many(self, keys: Sequence[Any]) -> dict[Any, bytes]: ...

    async def aput_many(self, items: dict[Any, bytes]) -> None: ...


class SegmentCachePolicy(Protocol):
    async def lookup(self, query: Query, tasks: Sequence[SegmentTask]) -> CacheLookup: ...

    async def complete(
        self, query: Query, lookup: CacheLookup, fetched: Sequence[SegmentTask], partials: Sequence[pa.Table]
    ) -> None: ...

    def release(self, lookup: CacheLookup) -> None: ...


class NoSegmentCache:
    async def lookup(self, query: Query, tasks: Sequence[SegmentTask]) -> CacheLookup:
        return CacheLookup(to_fetch=list(tasks))

    async def complete(
        self, query: Query, lookup: CacheLookup, fetched: Sequence[SegmentTask], partials: Sequence[pa.Table]
    ) -> None:
        return None

    def release(self, lookup: CacheLookup) -> None:
        return None
