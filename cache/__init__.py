"""Per-segment result cache: one interface (`ResultCache`), LRU / memcached / two-level backends.

A leaf package: keys and values are bytes, and nothing here knows about queries or segments beyond
the namespace string a key carries (the segment id, the unit of invalidation).
"""

from cache.base import CacheKey, ResultCache
from cache.factory import CACHE_KINDS, create_cache
from cache.hybrid import HybridCache
from cache.lru import LruCache
from cache.memcached import MemcachedCache, parse_servers
from cache.null import NullCache
from cache.stats import CacheStats

__all__ = [
    "CACHE_KINDS",
    "CacheKey",
    "CacheStats",
    "HybridCache",
    "LruCache",
    "MemcachedCache",
    "NullCache",
    "ResultCache",
    "create_cache",
    "parse_servers",
]
