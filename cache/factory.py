"""Build the backend named by the broker's `--cache`, `--cache-size` and `--memcached` flags."""

from __future__ import annotations

from collections.abc import Sequence

from cache.base import ResultCache
from cache.hybrid import HybridCache
from cache.lru import DEFAULT_MAX_ENTRY_SIZE, LruCache
from cache.memcached import MemcachedCache
from cache.null import NullCache

CACHE_KINDS = ("none", "lru", "memcached", "hybrid")
DEFAULT_CACHE_SIZE = 256 * 1024 * 1024


def create_cache(
    kind: str,
    size_bytes: int = DEFAULT_CACHE_SIZE,
    memcached_servers: str | Sequence[str] = "",
    prefix: str = "strata",
    max_entry_size: int = DEFAULT_MAX_ENTRY_SIZE,
    timeout_s: float = 0.5,
    retry_interval_s: float = 1.0,
) -> ResultCache:
    """A ready cache (values arrive already compact: the broker compresses large partials itself).

    Raises ValueError for an unknown kind, a non-positive LRU size or missing/bad server addresses,
    so a misconfigured broker fails at start-up with a message naming the flag's value.
    """
    if kind not in CACHE_KINDS:
        raise ValueError(f"unknown cache kind {kind!r}; expected one of {', '.join(CACHE_KINDS)}")
    if kind == "none":
        return NullCache()
    cache: ResultCache
    if kind == "lru":
        cache = LruCache(size_bytes, max_entry_size)
    else:
        remote = MemcachedCache(
            memcached_servers, prefix=prefix, timeout_s=timeout_s, retry_interval_s=retry_interval_s
        )
        cache = remote if kind == "memcached" else HybridCache(LruCache(size_bytes, max_entry_size), remote)
    return cache
