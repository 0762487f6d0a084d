import pytest

from cache import (
    HybridCache,
    LruCache,
    MemcachedCache,
    NullCache,
    create_cache,
)
from cache.base import CacheKey


def test_none_never_hits():
    cache = create_cache("none", 0)
    assert isinstance(cache, NullCache)
    cache.put_many({CacheKey("s", b"k"): b"v"})
    assert cache.get_many([CacheKey("s", b"k")]) == {}
    assert cache.stats().misses == 1


def test_lru_gets_the_size():
    cache = create_cache("lru", 12345)
    assert isinstance(cache, LruCache) and cache.max_bytes == 12345


@pytest.mark.parametrize(
    "servers", ["127.0.0.1:11311,127.0.0.2:11311", ["127.0.0.2:11311", "127.0.0.1:11311"]]
)
def test_memcached_and_hybrid_take_string_or_list(servers):
    mc = create_cache("memcached", 0, servers, prefix="p")
    hy = create_cache("hybrid", 1000, servers)
    try:
        assert isinstance(mc, MemcachedCache) and mc.prefix == "p"
        assert mc.server_names == ["127.0.0.1:11311", "127.0.0.2:11311"]
        assert isinstance(hy, HybridCache)
        assert isinstance(hy.l1, LruCache) and hy.l1.max_bytes == 1000
        assert isinstance(hy.l2, MemcachedCache)
    finally:
        mc.close()
        hy.close()


@pytest.mark.parametrize(
    ("kind", "size", "servers", "message"),
    [
        ("redis", 100, "", "unknown cache kind"),
        ("lru", 0, "", "positive"),
        ("memcached", 100, "", "no memcached servers"),
        ("hybrid", 100, "", "no memcached servers"),
        ("memcached", 100, "host:port", "bad memcached server"),
    ],
)
def test_misconfiguration_is_a_clear_value_error(kind, size, servers, message):
    with pytest.raises(ValueError, match=message):
        create_cache(kind, size, servers)
