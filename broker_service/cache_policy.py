"""The seam for the per-segment result cache, between segment planning and scatter.

A policy splits the planned segments into cached partials and segments to fetch, and afterwards
stores what the data nodes returned. `NoSegmentCache` is the policy without a cache.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import pyarrow as pa

from broker_service.segment_plan import SegmentTask
from query import Query


@dataclass
class CacheLookup:
    hits: list[pa.Table] = field(default_factory=list)  # cached partials, one per hit segment
    to_fetch: list[SegmentTask] = field(default_factory=list)
    to_populate: list[SegmentTask] = field(default_factory=list)  # misses to store once fetched


class SegmentCachePolicy(Protocol):
    async def lookup(self, query: Query, tasks: Sequence[SegmentTask]) -> CacheLookup: ...

    async def populate(
        self, query: Query, tasks: Sequence[SegmentTask], partials: Sequence[pa.Table]
    ) -> None: ...


class NoSegmentCache:
    async def lookup(self, query: Query, tasks: Sequence[SegmentTask]) -> CacheLookup:
        return CacheLookup(to_fetch=list(tasks))

    async def populate(
        self, query: Query, tasks: Sequence[SegmentTask], partials: Sequence[pa.Table]
    ) -> None:
        return None
