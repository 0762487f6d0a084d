"""The cache for `--cache none`: every lookup misses, every put is dropped."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from cache.base import CacheKey, ResultCache
from cache.stats import CacheStats, StatsCounter


class NullCache(ResultCache):
    def __init__(self) -> None:
        self._counters = StatsCounter()

    def get_many(self, keys: Sequence[CacheKey]) -> dict[CacheKey, bytes]:
        self._counters.add("misses", len(keys))
        return {}

    def put_many(self, items: Mapping[CacheKey, bytes]) -> None:
        return None

    def close_namespace(self, namespace: str) -> None:
        return None

    def stats(self) -> CacheStats:
        return self._counters.snapshot()
