import asyncio
import uuid

import pytest

from cache import CacheKey, HybridCache, LruCache, MemcachedCache


def k(i: int) -> CacheKey:
    return CacheKey(f"seg{i}", b"q%d" % i)


def test_l2_hits_are_promoted_to_l1():
    l1, l2 = LruCache(100_000), LruCache(100_000)
    l2.put_many({k(1): b"remote"})
    hybrid = HybridCache(l1, l2)
    assert hybrid.get_many([k(1), k(2)]) == {k(1): b"remote"}
    assert l1.get_many([k(1)]) == {k(1): b"remote"}
    assert hybrid.get_many([k(1)]) == {k(1): b"remote"}
    assert l2.stats().hits == 1  # the second lookup never reached L2
    s = hybrid.stats()
    assert (s.hits, s.misses) == (2, 1)
    assert hybrid.level_stats()["l1"].entries == 1


def test_aget_all_reads_l2_only_for_what_l1_lacks_all_or_nothing():
    l1, l2 = LruCache(100_000), LruCache(100_000)
    hybrid = HybridCache(l1, l2)
    l1.put_many({k(1): b"one"})
    l2.put_many({k(2): b"two"})
    keys = [k(1), k(2), k(3)]
    assert asyncio.run(hybrid.aget_all(keys)) is None  # k3 nowhere: nothing counted, nothing promoted
    assert [s.lookups for s in (hybrid.stats(), l1.stats(), l2.stats())] == [0, 0, 0]
    assert l1.get_all([k(2)]) is None
    l2.put_many({k(3): b"three"})
    assert asyncio.run(hybrid.aget_all(keys)) == [b"one", b"two", b"three"]
    assert (l1.stats().hits, l1.stats().misses, l2.stats().hits, l2.stats().misses) == (1, 2, 2, 0)
    assert (hybrid.stats().hits, hybrid.stats().misses) == (3, 0)
    assert asyncio.run(hybrid.aget_all(keys)) == [b"one", b"two", b"three"]  # all from L1 now
    assert (l1.stats().hits, l2.stats().hits, hybrid.stats().hits) == (4, 2, 6)


def test_puts_go_to_both_levels_and_close_namespace_reaches_both():
    l1, l2 = LruCache(100_000), LruCache(100_000)
    hybrid = HybridCache(l1, l2)
    hybrid.put_many({k(1): b"a", k(2): b"b"})
    assert l1.get_many([k(1), k(2)]) == l2.get_many([k(1), k(2)]) == {k(1): b"a", k(2): b"b"}
    hybrid.close_namespace("seg1")
    assert hybrid.get_many([k(1), k(2)]) == {k(2): b"b"}


def test_stats_take_size_from_l1_and_errors_from_both():
    l1, l2 = LruCache(100_000, max_entry_size=10), LruCache(100_000)
    hybrid = HybridCache(l1, l2)
    hybrid.put_many({k(1): b"x" * 100})  # too big for L1 only
    s = hybrid.stats()
    assert (s.entries, s.bytes, s.put_skipped_too_large) == (0, 0, 1)
    assert hybrid.get_many([k(1)]) == {k(1): b"x" * 100}  # served by L2; too big to promote


@pytest.mark.integration
@pytest.mark.timeout(60)
def test_two_brokers_over_real_memcached(memcached_server):
    prefix = "h" + uuid.uuid4().hex[:12]

    def broker() -> HybridCache:
        return HybridCache(LruCache(1_000_000), MemcachedCache(memcached_server.address, prefix=prefix))

    a, b = broker(), broker()
    items = {k(i): b"partial-%d" % i * 100 for i in range(10)}

    async def run():
        await a.aput_many(items)
        first = await b.aget_many(list(items))
        second = await b.aget_many(list(items))
        return first, second

    try:
        first, second = asyncio.run(run())
        assert first == second == items
        assert b.level_stats()["l2"].hits == 10  # second lookup all from b's L1
        assert b.level_stats()["l1"].hits == 10
        assert (b.stats().hits, b.stats().misses) == (20, 0)
    finally:
        a.close()
        b.close()
