import threading

import pytest

from cache.stats import COUNTER_NAMES, CacheStats, StatsCounter


def test_hit_rate_is_hits_over_lookups():
    assert CacheStats(hits=3, misses=1).hit_rate == 0.75
    assert CacheStats(hits=0, misses=5).hit_rate == 0.0
    assert CacheStats().hit_rate == 0.0  # no lookups yet: defined, not a ZeroDivisionError


def test_addition_sums_every_field():
    a = CacheStats(1, 2, 3, 4, 5, 6, 7, 8, 9)
    b = CacheStats(10, 20, 30, 40, 50, 60, 70, 80, 90)
    total = a + b
    assert total == CacheStats(11, 22, 33, 44, 55, 66, 77, 88, 99)
    assert total.hit_rate == 11 / 33


def test_as_dict_carries_hit_rate():
    d = CacheStats(hits=1, misses=3, errors=2).as_dict()
    assert d["hit_rate"] == 0.25
    assert d["errors"] == 2
    assert set(COUNTER_NAMES) <= set(d)


def test_counter_rejects_unknown_names():
    with pytest.raises(KeyError):
        StatsCounter().add("hitz")


def test_counters_are_thread_safe():
    counter = StatsCounter()
    threads, per_thread = 8, 5000

    def work():
        for _ in range(per_thread):
            counter.add("hits")
            counter.add("misses", 2)

    workers = [threading.Thread(target=work) for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    snap = counter.snapshot(entries=7, size_bytes=99)
    assert (snap.hits, snap.misses) == (threads * per_thread, 2 * threads * per_thread)
    assert (snap.entries, snap.bytes) == (7, 99)
