"""MemcachedCache against real memcached servers on loopback (started and stopped by pid)."""

import asyncio
import logging
import socket
import time
import uuid
from collections.abc import Iterator

import pytest
from pymemcache.client.base import Client

from cache import CacheKey, MemcachedCache, parse_servers
from cache.memcached_format import frame, memcached_key
from strata.cli.local_servers import MemcachedServer, free_port

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

LONG_UNICODE_NS = "wikipedia_2015-09-12T00:00:00.000Z_2015-09-13T00:00:00.000Z_v1_" * 20 + "ünïcødé_日本語"


def keys(n: int, ns: str = "seg") -> list[CacheKey]:
    return [CacheKey(f"{ns}{i}", b"query-key-%d" % i) for i in range(n)]


@pytest.fixture
def prefix() -> str:
    return "t" + uuid.uuid4().hex[:12]  # isolates tests sharing the session server


@pytest.fixture(scope="module")
def second_server() -> Iterator[MemcachedServer]:
    server = MemcachedServer(port=free_port()).start()
    try:
        yield server
    finally:
        server.stop()


def raw_client(server: MemcachedServer) -> Client:
    return Client(("127.0.0.1", server.port), timeout=2, connect_timeout=2, default_noreply=False)


def test_round_trip(memcached_server, prefix):
    with MemcachedCache(memcached_server.address, prefix=prefix) as cache:
        items = {k: bytes([i]) * 4096 for i, k in enumerate(keys(10))}
        cache.put_many(items)
        got = cache.get_many([*keys(10), CacheKey("absent", b"x")])
        assert got == items
        s = cache.stats()
        assert (s.hits, s.misses, s.errors, s.collisions) == (10, 1, 0, 0)


def test_async_round_trip(memcached_server, prefix):
    cache = MemcachedCache(memcached_server.address, prefix=prefix)

    async def run():
        await cache.aput_many({k: b"v-" + k.key for k in keys(5)})
        return await cache.aget_many(keys(6))

    try:
        assert asyncio.run(run()) == {k: b"v-" + k.key for k in keys(5)}
    finally:
        cache.close()


def test_two_brokers_share_entries(memcached_server, second_server, prefix):
    """Two clients listing the servers in different orders agree on where each key lives."""
    a_servers = f"{memcached_server.address},{second_server.address}"
    b_servers = [second_server.address, memcached_server.address]
    items = {k: b"partial of " + k.namespace.encode() for k in keys(40)}
    with (
        MemcachedCache(a_servers, prefix=prefix) as a,
        MemcachedCache(b_servers, prefix=prefix, parallel_fanout=True) as b,
    ):
        asyncio.run(a.aput_many(items))
        assert b.get_many(list(items)) == items
        assert asyncio.run(b.aget_many(list(items))) == items
        assert b.stats().hits == 80
    # the keys really are spread over both servers
    per_server = []
    for server in (memcached_server, second_server):
        client = raw_client(server)
        per_server.append(len(client.get_many([memcached_key(prefix, k) for k in items])))
        client.close()
    assert sum(per_server) == 40 and min(per_server) > 0


def test_long_unicode_namespace(memcached_server, prefix):
    key = CacheKey(LONG_UNICODE_NS, b"\xff\x00" * 300)
    with MemcachedCache(memcached_server.address, prefix=prefix) as cache:
        cache.put_many({key: b"value"})
        assert cache.get_many([key]) == {key: b"value"}


def test_foreign_entry_under_same_memcached_key_is_a_miss(memcached_server, prefix):
    """Force a 'collision': another key's framed value stored under our key's memcached name."""
    mine, other = CacheKey("seg-a", b"mine"), CacheKey("seg-b", b"other")
    client = raw_client(memcached_server)
    client.set(memcached_key(prefix, mine), frame(other, b"NOT YOURS"))
    client.set(memcached_key(prefix, CacheKey("seg-c", b"junk")), b"\x00\x01")
    client.close()
    with MemcachedCache(memcached_server.address, prefix=prefix) as cache:
        assert cache.get_many([mine, CacheKey("seg-c", b"junk")]) == {}
        s = cache.stats()
        assert (s.collisions, s.hits, s.misses) == (2, 0, 2)


def test_values_over_the_item_limit_are_skipped(memcached_server, prefix):
    small, big, edge = CacheKey("s", b"small"), CacheKey("s", b"big"), CacheKey("s", b"edge")
    with MemcachedCache(memcached_server.address, prefix=prefix) as cache:
        edge_value = b"e" * (cache.max_value_size - len(frame(edge, b"")))
        cache.put_many({small: b"ok", big: b"x" * (2 * 1024 * 1024), edge: edge_value})
        assert cache.get_many([small, big, edge]) == {small: b"ok", edge: edge_value}
        s = cache.stats()
        assert (s.put_skipped_too_large, s.errors) == (1, 0)


def test_server_rejecting_a_large_item_is_not_an_outage(memcached_server, prefix):
    """Our limit set above the server's -I: the server refuses, we count it and keep the server."""
    big, small = CacheKey("s", b"big"), CacheKey("s", b"small")
    with MemcachedCache(
        memcached_server.address, prefix=prefix, max_value_size=4 * 1024 * 1024, retry_interval_s=60
    ) as cache:
        cache.put_many({big: b"x" * (2 * 1024 * 1024)})
        cache.put_many({small: b"fine"})
        assert cache.get_many([big, small]) == {small: b"fine"}
        s = cache.stats()
        assert (s.put_skipped_too_large, s.errors, s.timeouts) == (1, 0, 0)


def test_nothing_listening_fails_open(prefix):
    cache = MemcachedCache(f"127.0.0.1:{free_port()}", prefix=prefix, retry_interval_s=60)
    try:
        assert cache.get_many(keys(3)) == {}
        cache.put_many({k: b"v" for k in keys(3)})  # dropped, no exception
        assert asyncio.run(cache.aget_many(keys(3))) == {}
        s = cache.stats()
        assert s.misses == 6
        # one failed attempt, then the server is skipped without touching the network until retry
        assert (s.errors, s.timeouts) == (1, 0)
    finally:
        cache.close()


def test_breaker_opens_on_the_first_error_and_queries_skip_the_server(prefix, caplog):
    """Once open, lookups touch no network: one error counted, one warning, one trip."""
    cache = MemcachedCache(
        f"127.0.0.1:{free_port()}", prefix=prefix, retry_interval_s=60, log_interval_s=3600
    )
    try:
        with caplog.at_level(logging.WARNING, logger="cache.memcached"):
            for _ in range(5):
                assert cache.get_many(keys(1)) == {}
                assert asyncio.run(cache.aget_many(keys(1))) == {}
        s = cache.stats()
        assert (s.errors, s.misses) == (1, 10)
        assert not cache.available()
        assert list(cache.breaker_status().values()) == [{"state": "open", "trips": 1}]
        warnings = [r for r in caplog.records if r.name == "cache.memcached"]
        assert len(warnings) == 1
        assert "breaker open" in warnings[0].getMessage()
    finally:
        cache.close()


def test_probe_does_not_close_the_breaker_while_the_server_is_silent(prefix):
    """The probe, not a query, pays the connect/answer timeout; a silent server keeps it open."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        address = f"127.0.0.1:{silent.getsockname()[1]}"
        with MemcachedCache(address, prefix=prefix, timeout_s=0.1, retry_interval_s=0.05) as cache:
            assert cache.get_many(keys(1)) == {}  # times out, trips
            time.sleep(0.5)  # several probes, each timing out
            assert cache.breaker_status()[address] == {"state": "open", "trips": 1}
            assert cache.stats().timeouts == 1


def test_unresponsive_server_times_out_and_fails_open(prefix):
    """A socket that accepts connections (kernel backlog) but never answers: a timeout, not a hang."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        address = f"127.0.0.1:{silent.getsockname()[1]}"
        with MemcachedCache(address, prefix=prefix, timeout_s=0.2, retry_interval_s=60) as cache:
            assert cache.get_many(keys(2)) == {}
            cache.put_many({k: b"v" for k in keys(2)})
            s = cache.stats()
            assert (s.timeouts, s.errors, s.misses) == (1, 0, 2)


def test_waiting_on_a_slow_server_does_not_block_the_event_loop(prefix):
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        cache = MemcachedCache(f"127.0.0.1:{silent.getsockname()[1]}", prefix=prefix, timeout_s=0.3)

        async def run():
            ticks = 0
            lookup = asyncio.create_task(cache.aget_many(keys(1)))
            while not lookup.done():
                ticks += 1
                await asyncio.sleep(0.005)
            return ticks, await lookup

        try:
            ticks, found = asyncio.run(run())
        finally:
            cache.close()
        assert found == {}
        assert ticks > 5  # the loop kept running while the lookup waited for its timeout
        assert cache.stats().timeouts == 1


@pytest.mark.parametrize("parallel", [False, True])
def test_one_dead_server_leaves_the_others_serving(memcached_server, prefix, parallel):
    doomed = MemcachedServer(port=free_port()).start()
    try:
        servers = f"{memcached_server.address},{doomed.address}"
        with MemcachedCache(servers, prefix=prefix, retry_interval_s=60, parallel_fanout=parallel) as cache:
            items = {k: b"v" for k in keys(30)}
            asyncio.run(cache.aput_many(items))
            probe = raw_client(memcached_server)
            on_live = {k for k in items if probe.get(memcached_key(prefix, k)) is not None}
            probe.close()
            assert 0 < len(on_live) < 30
            doomed.kill()
            assert set(cache.get_many(list(items))) == on_live
            assert set(asyncio.run(cache.aget_many(list(items)))) == on_live
            assert cache.stats().errors >= 1
            assert cache.available()  # one breaker open, the other server still used
            assert cache.breaker_status()[doomed.address]["state"] == "open"
            assert cache.breaker_status()[memcached_server.address] == {"state": "closed", "trips": 0}
    finally:
        doomed.stop()


def test_killed_server_gives_misses_and_recovers_on_restart(prefix):
    port = free_port()
    server = MemcachedServer(port=port).start()
    key = CacheKey("seg", b"k")
    try:
        with MemcachedCache(
            server.address, prefix=prefix, retry_interval_s=0.1, log_interval_s=3600
        ) as cache:
            cache.put_many({key: b"before"})
            assert cache.get_many([key]) == {key: b"before"}

            server.kill()
            assert cache.get_many([key]) == {}
            cache.put_many({key: b"lost"})  # dropped
            assert cache.stats().errors >= 1

            server = MemcachedServer(port=port).start()  # same port, empty memory
            found: dict = {}
            for _ in range(200):  # bounded: ~0.1 s retry interval, polled every 25 ms
                cache.put_many({key: b"after"})
                found = cache.get_many([key])
                if found:
                    break
                time.sleep(0.025)
            assert found == {key: b"after"}
            assert cache.breaker_status()[server.address] == {"state": "closed", "trips": 1}
    finally:
        server.stop()


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("h1:11211,h2:11212", [("h1", 11211), ("h2", 11212)]),
        (" h2:2 , h1:1 ,", [("h1", 1), ("h2", 2)]),
        (["localhost"], [("localhost", 11211)]),
        ("[::1]:11311", [("::1", 11311)]),
        ("h:1,h:1", [("h", 1)]),
    ],
)
def test_parse_servers(spec, expected):
    assert parse_servers(spec) == expected


@pytest.mark.parametrize("spec", ["", ",", "h:notaport", "h:0", "h:70000", ":11211"])
def test_parse_servers_rejects_bad_specs(spec):
    with pytest.raises(ValueError):
        parse_servers(spec)
