import asyncio
from collections import OrderedDict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cache import CacheKey, LruCache
from cache.lru import charged_size


def k(i: int, ns: str = "seg") -> CacheKey:
    return CacheKey(ns, b"key%03d" % i)


def test_round_trip_and_counts():
    c = LruCache(10_000)
    c.put_many({k(1): b"one", k(2): b"two"})
    assert c.get_many([k(1), k(2), k(3)]) == {k(1): b"one", k(2): b"two"}
    s = c.stats()
    assert (s.hits, s.misses, s.entries) == (2, 1, 2)
    assert s.bytes == charged_size(k(1), b"one") + charged_size(k(2), b"two")


def test_byte_bound_evicts_least_recently_used_first():
    entry = charged_size(k(0), b"x" * 100)  # every entry below has this size
    c = LruCache(max_bytes=3 * entry)
    c.put_many({k(i): b"x" * 100 for i in range(3)})
    c.get_many([k(0)])  # k0 becomes most recent: k1 is now the oldest
    c.put_many({k(3): b"x" * 100})
    assert set(c.get_many([k(i) for i in range(4)])) == {k(0), k(2), k(3)}
    s = c.stats()
    assert s.evictions == 1
    assert s.bytes == 3 * entry <= c.max_bytes


def test_one_large_entry_evicts_several_small_ones():
    small = charged_size(k(0), b"s" * 10)
    c = LruCache(max_bytes=10 * small)
    c.put_many({k(i): b"s" * 10 for i in range(10)})
    big_value = b"b" * (5 * small - len(k(99).key) - len(k(99).namespace))
    c.put_many({k(99): big_value})
    held = c.get_many([k(i) for i in range(10)] + [k(99)])
    assert held[k(99)] == big_value
    assert set(held) - {k(99)} == {k(i) for i in range(5, 10)}  # the five oldest went
    assert c.stats().evictions == 5


def test_oversize_entries_are_skipped_not_cached():
    c = LruCache(max_bytes=1_000_000, max_entry_size=1000)
    c.put_many({k(1): b"x" * 2000, k(2): b"y" * 10})
    assert c.get_many([k(1), k(2)]) == {k(2): b"y" * 10}
    s = c.stats()
    assert (s.put_skipped_too_large, s.evictions, s.entries) == (1, 0, 1)


def test_entry_bigger_than_whole_cache_is_skipped():
    c = LruCache(max_bytes=100, max_entry_size=10_000)
    c.put_many({k(1): b"x" * 500})
    assert c.get_many([k(1)]) == {}
    assert c.stats().put_skipped_too_large == 1


def test_close_namespace_drops_only_that_segment():
    c = LruCache(10_000)
    c.put_many({k(1, "a"): b"1", k(2, "a"): b"2", k(1, "b"): b"3"})
    c.close_namespace("a")
    assert c.get_many([k(1, "a"), k(2, "a"), k(1, "b")]) == {k(1, "b"): b"3"}
    assert c.stats().entries == 1
    c.close_namespace("never-seen")  # harmless


def test_replacing_a_value_keeps_one_entry():
    c = LruCache(10_000)
    c.put_many({k(1): b"old"})
    c.put_many({k(1): b"newer"})
    assert c.get_many([k(1)]) == {k(1): b"newer"}
    assert c.stats().entries == 1
    assert c.stats().bytes == charged_size(k(1), b"newer")


def test_async_wrappers_answer_inline():
    c = LruCache(10_000)

    async def run():
        await c.aput_many({k(1): b"v"})
        return await c.aget_many([k(1), k(2)])

    assert asyncio.run(run()) == {k(1): b"v"}
    assert c._executor is None  # the LRU never needed a thread


def test_bad_sizes_are_clear_errors():
    with pytest.raises(ValueError, match="positive"):
        LruCache(0)
    with pytest.raises(TypeError):
        CacheKey("ns", "not bytes")  # type: ignore[arg-type]


ops = st.lists(
    st.tuples(st.sampled_from(["get", "put", "all", "drop"]), st.integers(0, 15), st.integers(0, 300)),
    max_size=120,
)


def own(i: int) -> CacheKey:
    return k(i, f"seg{i}")  # a namespace each: dropping one drops one key


KEY_LISTS = [[own(i), own(i + 1), own((3 * i) % 16)] for i in range(14)]  # the same list objects each time


@settings(max_examples=150, deadline=None)
@given(ops=ops, max_bytes=st.integers(50, 2000))
def test_matches_a_plain_lru_model(ops, max_bytes):
    """Oracle: an OrderedDict LRU charged by the same sizes, evicting from the old end; the keys a
    get_all reads become the most recent at the next write (in the order their lists were first
    read since the last one), as documented."""
    cache = LruCache(max_bytes=max_bytes, max_entry_size=max_bytes)
    model: OrderedDict[CacheKey, bytes] = OrderedDict()
    pending: dict[int, list[CacheKey]] = {}

    def settle() -> None:
        for keys in pending.values():
            for x in keys:
                model.move_to_end(x)
        pending.clear()

    for op, i, size in ops:
        key = own(i)
        if op == "get":
            got = cache.get_many([key])
            assert got.get(key) == model.get(key)
            if key in model:
                model.move_to_end(key)
        elif op == "all":
            keys = KEY_LISTS[i % len(KEY_LISTS)]
            every = cache.get_all(keys)
            if all(x in model for x in keys):
                assert every == [model[x] for x in keys]
                pending.setdefault(id(keys), keys)
            else:
                assert every is None
        elif op == "drop":
            settle()
            cache.close_namespace(key.namespace)
            model.pop(key, None)
        else:
            value = bytes([i]) * size
            if charged_size(key, value) > max_bytes:
                continue
            settle()
            model.pop(key, None)
            while (
                model
                and sum(charged_size(x, v) for x, v in model.items()) + charged_size(key, value) > max_bytes
            ):
                model.popitem(last=False)
            cache.put_many({key: value})
            model[key] = value
    assert cache.stats().bytes == sum(charged_size(x, v) for x, v in model.items())
    assert cache.stats().entries == len(model)


def test_get_all_reads_every_key_or_none():
    entry = charged_size(k(0), b"x" * 100)
    c = LruCache(max_bytes=3 * entry)
    c.put_many({k(i): b"x" * 100 for i in range(3)})
    assert c.get_all([k(0), k(3)]) is None  # one absent: nothing read, nothing counted, none touched
    assert (c.stats().hits, c.stats().misses) == (0, 0)
    assert c.get_all([k(1), k(0)]) == [b"x" * 100, b"x" * 100]  # in the keys' order
    assert c.stats().hits == 2
    c.put_many({k(3): b"x" * 100})  # k0 and k1 were touched by the read: k2 is the oldest
    assert set(c.get_many([k(i) for i in range(4)])) == {k(0), k(1), k(3)}


def test_get_all_of_one_key_or_none_and_the_hybrids_peek():
    c = LruCache(max_bytes=10_000)
    c.put_many({k(0): b"a", k(1): b"b"})
    assert c.get_all([]) == [] and c.get_all([k(5)]) is None
    assert (c.stats().hits, c.stats().misses) == (0, 0)
    assert c.get_all([k(0)]) == [b"a"] and c.stats().hits == 1
    assert c.peek_many([k(1), k(5), k(0)]) == {k(1): b"b", k(0): b"a"}  # nothing counted or touched
    assert (c.stats().hits, c.stats().misses) == (1, 0)
    assert asyncio.run(c.aget_all([k(1), k(0)])) == [b"b", b"a"]


def test_keys_compare_by_value_and_survive_pickling():
    import pickle

    a = CacheKey("seg", b"q")
    assert a == CacheKey("seg", b"q") and hash(a) == hash(CacheKey("seg", b"q"))
    assert a != CacheKey("seg", b"r") and a != CacheKey("ses", b"q")
    assert (a.namespace, a.key) == ("seg", b"q")
    copy = pickle.loads(pickle.dumps(a))
    assert copy == a and type(copy) is CacheKey and repr(copy) == "CacheKey(namespace='seg', key=b'q')"
    with pytest.raises(TypeError):
        CacheKey(b"seg", b"q")  # type: ignore[arg-type]


def test_a_repeated_get_all_sees_every_write_between():
    c = LruCache(max_bytes=10_000)
    keys = [own(0), own(1), own(2)]
    c.put_many({x: b"old" for x in keys})
    assert c.get_all(keys) == [b"old"] * 3
    c.put_many({own(1): b"new"})  # the same key list read again: the new value, not the one read
    assert c.get_all(keys) == [b"old", b"new", b"old"]
    c.close_namespace(own(2).namespace)
    assert c.get_all(keys) is None
    assert c.stats().hits == 6
