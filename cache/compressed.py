"""Any backend with values compressed on the way in (see `codec`), so more results fit and less crosses
the network. A value that cannot be decoded (damaged, or a codec this build lacks) reads as a miss."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from cache.base import CacheKey, ResultCache
from cache.codec import CodecError, ValueCodec
from cache.stats import CacheStats, StatsCounter


class CompressedCache(ResultCache):
    def __init__(self, inner: ResultCache, codec: ValueCodec):
        self.inner = inner
        self.codec = codec
        self.blocking = inner.blocking
        self._counters = StatsCounter()  # decode failures: hits of the inner cache that became misses

    def _decode_all(self, stored: dict[CacheKey, bytes]) -> dict[CacheKey, bytes]:
        found: dict[CacheKey, bytes] = {}
        for key, data in stored.items():
            try:
                found[key] = self.codec.decode(data)
            except CodecError:
                self._counters.add("errors")
                self._counters.add("misses")
                self._counters.add("hits", -1)
        return found

    def get_many(self, keys: Sequence[CacheKey]) -> dict[CacheKey, bytes]:
        return self._decode_all(self.inner.get_many(keys))

    async def aget_many(self, keys: Sequence[CacheKey]) -> dict[CacheKey, bytes]:
        stored = await self.inner.aget_many(keys)
        if self.blocking and stored:  # large values: keep (de)compression off the event loop
            return await self.run_blocking(self._decode_all, stored)
        return self._decode_all(stored)

    def _encode_all(self, items: Mapping[CacheKey, bytes]) -> dict[CacheKey, bytes]:
        return {key: self.codec.encode(value) for key, value in items.items()}

    def put_many(self, items: Mapping[CacheKey, bytes]) -> None:
        self.inner.put_many(self._encode_all(items))

    async def aput_many(self, items: Mapping[CacheKey, bytes]) -> None:
        if self.blocking:
            encoded = await self.run_blocking(self._encode_all, dict(items))
        else:
            encoded = self._encode_all(items)
        await self.inner.aput_many(encoded)

    def close_namespace(self, namespace: str) -> None:
        self.inner.close_namespace(namespace)

    def stats(self) -> CacheStats:
        return self.inner.stats() + self._counters.snapshot()

    def available(self) -> bool:
        return self.inner.available()

    def breaker_status(self) -> dict[str, dict[str, Any]]:
        return self.inner.breaker_status()

    def close(self) -> None:
        self.inner.close()
        super().close()
