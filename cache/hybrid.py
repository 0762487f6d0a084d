"""Two levels: this broker's LRU (L1) in front of the memcached shared by all brokers (L2).

L1 answers hot keys without a network round trip; L2 lets one broker reuse what another computed.
An L2 hit is copied into L1 so the next lookup stays local; a put goes to both levels. The
broker's warm read (`aget_all`) takes everything from L1 when it can, and asks L2 only for what
L1 lacks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from cache.base import CacheKey, ResultCache
from cache.lru import LruCache
from cache.stats import CacheStats, StatsCounter


class HybridCache(ResultCache):
    blocking = True

    def __init__(self, l1: LruCache, l2: ResultCache):
        self.l1 = l1
        self.l2 = l2
        self._counters = StatsCounter()  # hits/misses as the caller sees them: found at either level

    def _merge(
        self, keys: Sequence[CacheKey], local: dict[CacheKey, bytes], remote: dict[CacheKey, bytes]
    ) -> None:
        local.update(remote)
        self._counters.add("hits", len(local))
        self._counters.add("misses", len(keys) - len(local))

    def get_many(self, keys: Sequence[CacheKey]) -> dict[CacheKey, bytes]:
        found = self.l1.get_many(keys)
        missing = [k for k in keys if k not in found]
        remote = self.l2.get_many(missing) if missing else {}
        if remote:
            self.l1.put_many(remote)
        self._merge(keys, found, remote)
        return found

    async def aget_many(self, keys: Sequence[CacheKey]) -> dict[CacheKey, bytes]:
        found = await self.l1.aget_many(keys)
        missing = [k for k in keys if k not in found]
        remote = await self.l2.aget_many(missing) if missing else {}
        if remote:
            await self.l1.aput_many(remote)
        self._merge(keys, found, remote)
        return found

    async def aget_all(self, keys: Sequence[CacheKey]) -> list[bytes] | None:
        """Every value from L1 without a round trip when it holds them all; else one L2 read of
        those it lacks, all or none. Counted as `aget_many` counts (L1's hits and misses, L2's
        hits, the promotion) once every value is found; on None nothing is counted or promoted,
        for the caller's full lookup to do."""
        every = await self.l1.aget_all(keys)
        if every is not None:
            self._counters.add("hits", len(every))
            return every
        local = self.l1.peek_many(keys)
        missing = [k for k in keys if k not in local]
        remote = await self.l2.aget_all(missing) if missing else []
        if remote is None:
            return None
        fetched = dict(zip(missing, remote, strict=True))
        self.l1.get_many(keys)  # L1's hits and misses as a lookup counts them, its hits made recent
        self.l1.put_many(fetched)
        self._counters.add("hits", len(keys))
        return [local[k] if k in local else fetched[k] for k in keys]

    def put_many(self, items: Mapping[CacheKey, bytes]) -> None:
        self.l1.put_many(items)
        self.l2.put_many(items)

    async def aput_many(self, items: Mapping[CacheKey, bytes]) -> None:
        await self.l1.aput_many(items)
        await self.l2.aput_many(items)

    def close_namespace(self, namespace: str) -> None:
        self.l1.close_namespace(namespace)
        self.l2.close_namespace(namespace)

    def stats(self) -> CacheStats:
        """Hits/misses of the pair; size and evictions from L1; errors of either level."""
        own, l1, l2 = self._counters.snapshot(), self.l1.stats(), self.l2.stats()
        return CacheStats(
            hits=own.hits,
            misses=own.misses,
            evictions=l1.evictions + l2.evictions,
            entries=l1.entries,
            bytes=l1.bytes,
            errors=l1.errors + l2.errors,
            timeouts=l1.timeouts + l2.timeouts,
            put_skipped_too_large=l1.put_skipped_too_large + l2.put_skipped_too_large,
            collisions=l1.collisions + l2.collisions,
        )

    def breaker_status(self) -> dict[str, dict[str, Any]]:
        return {**self.l1.breaker_status(), **self.l2.breaker_status()}

    def level_stats(self) -> dict[str, CacheStats]:
        return {"l1": self.l1.stats(), "l2": self.l2.stats()}

    def close(self) -> None:
        self.l1.close()
        self.l2.close()
        super().close()
