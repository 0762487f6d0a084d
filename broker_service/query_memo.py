"""Values derived from a parsed query, computed once per query object.

A repeated body's parse is one object reused by every repeat (broker_service.query_bodies), and the
warm per-segment path (broker_service.segment_path) asks that object for its cache key twice per
request: a digest of its aggregators, filter and granularity as JSON, about 5% of the request's
CPU. Queries are immutable, so the value of one object never changes; entries hold their query,
so an id is never reused while remembered.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

from cachetools import LRUCache

from strata.query import Query

T = TypeVar("T")
QUERIES = 512  # as many as the parsed bodies remembered


class PerQuery(Generic[T]):
    def __init__(self, compute: Callable[[Query], T], size: int = QUERIES):
        self._compute = compute
        self._values: LRUCache[int, tuple[Query, T]] = LRUCache(size)
        self._lock = threading.Lock()  # merges run on worker threads too

    def __call__(self, query: Query) -> T:
        with self._lock:
            entry = self._values.get(id(query))
        if entry is not None and entry[0] is query:
            return entry[1]
        value = self._compute(query)  # raises as the computation does: nothing remembered
        with self._lock:
            self._values[id(query)] = (query, value)
        return value
