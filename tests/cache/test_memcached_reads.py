"""The broker's reads from memcached (cache.memcached_reads) against real memcached processes on
loopback, and against a scripted server for the faults a real one does not make on demand.

What pymemcache writes, the reads give back byte for byte; a value read before is confirmed by its
CAS instead of read again, and never served once the item changed: replaced by another client,
deleted, or rewritten by a restarted server that counts its CAS from 1 again.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from pymemcache.client.base import Client

from cache import CacheKey, MemcachedCache
from cache.memcached_format import frame, memcached_key
from cache.memcached_reads import KnownValues, ReadBatch
from cache.meta_connection import MetaConnection
from strata.cli.local_servers import MemcachedServer, free_port

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


def keys(n: int, ns: str = "seg") -> list[CacheKey]:
    return [CacheKey(f"{ns}{i}", b"query-key-%d" % i) for i in range(n)]


@pytest.fixture
def prefix() -> str:
    return "r" + uuid.uuid4().hex[:12]  # isolates tests sharing the session server


@contextlib.contextmanager
def raw_client(address: str) -> Iterator[Client]:
    host, port = address.split(":")
    client = Client((host, int(port)), timeout=2, connect_timeout=2, default_noreply=False)
    try:
        yield client
    finally:
        client.close()


def write_raw(address: str, prefix: str, items: dict[CacheKey, bytes]) -> None:
    """As another broker writes: pymemcache, the framed value under the key's memcached name."""
    with raw_client(address) as client:
        for key, value in items.items():
            assert client.set(memcached_key(prefix, key), frame(key, value))


# values that look like the protocol, binary ones, one far past a single recv
VALUES = [
    b"plain",
    b"a\r\nb",
    b"ends in MN\r\n",
    b"VA 5 c1\r\nEN\r\n",
    b"\x00\xff" * 300,
    bytes(range(256)) * 2_400,
]


def test_values_written_by_pymemcache_read_back_byte_identical(memcached_server, prefix):
    items = dict(zip(keys(len(VALUES)), VALUES, strict=True))
    write_raw(memcached_server.address, prefix, items)
    with MemcachedCache(memcached_server.address, prefix=prefix) as cache:

        async def reads() -> tuple[list[bytes] | None, list[bytes] | None, dict[CacheKey, bytes]]:
            return (
                await cache.aget_all(list(items)),
                await cache.aget_all(list(items)),
                await cache.aget_many(list(items)),
            )

        first, again, many = asyncio.run(reads())
        assert first == again == VALUES
        assert many == items
        assert cache.stats().hits == 3 * len(VALUES)


@pytest.fixture
def requests(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """Every request the reads' connections write, in order."""
    written: list[bytes] = []
    exchange = MetaConnection.exchange

    async def recorded(self: MetaConnection, request: bytes, *args: Any, **kwargs: Any) -> Any:
        written.append(request)
        return await exchange(self, request, *args, **kwargs)

    monkeypatch.setattr(MetaConnection, "exchange", recorded)
    return written


def test_a_repeat_asks_only_for_the_cas(memcached_server, prefix, requests):
    items = {k: b"partial %d " % i * 100 for i, k in enumerate(keys(50))}
    write_raw(memcached_server.address, prefix, items)
    with MemcachedCache(memcached_server.address, prefix=prefix) as cache:
        wanted = list(items)

        async def read_thrice() -> None:
            for _ in range(3):
                assert await cache.aget_all(wanted) == list(items.values())

        asyncio.run(read_thrice())
    stats, first, *repeats = requests
    assert stats == b"stats\r\n"
    assert first.count(b" v c\r\n") == 50
    assert len(repeats) == 2
    assert all(r.count(b" c\r\n") == 50 and b" v c\r\n" not in r for r in repeats)


def test_concurrent_reads_share_round_trips_and_see_a_write_made_before_they_began(
    memcached_server, prefix, requests
):
    wanted = keys(30)
    write_raw(memcached_server.address, prefix, {k: b"old" for k in wanted})
    with MemcachedCache(memcached_server.address, prefix=prefix) as cache:

        async def burst() -> list[list[bytes] | None]:
            assert await cache.aget_all(wanted) == [b"old"] * 30
            write_raw(memcached_server.address, prefix, {wanted[9]: b"new"})
            return await asyncio.gather(*(cache.aget_all(wanted) for _ in range(20)))

        requests.clear()
        answers = asyncio.run(burst())
        expected = [b"new" if i == 9 else b"old" for i in range(30)]
        assert answers == [expected] * 20
        assert 2 <= len([r for r in requests if r.startswith(b"mg ")]) <= 6  # not one per read
        assert cache.stats().hits == 21 * 30


def test_missing_keys(memcached_server, prefix):
    present = keys(5)
    write_raw(memcached_server.address, prefix, {k: b"v" for k in present})
    absent = CacheKey("absent", b"x")
    with MemcachedCache(memcached_server.address, prefix=prefix) as cache:
        assert asyncio.run(cache.aget_all([*present, absent])) is None
        assert asyncio.run(cache.aget_many([*present, absent])) == {k: b"v" for k in present}
        s = cache.stats()
        assert (s.hits, s.misses, s.errors) == (5, 1, 0)  # aget_all's none counts nothing


def test_an_item_replaced_or_deleted_by_another_client_is_read_anew(memcached_server, prefix):
    wanted = keys(20)
    write_raw(memcached_server.address, prefix, {k: b"old %d" % i for i, k in enumerate(wanted)})
    with MemcachedCache(memcached_server.address, prefix=prefix, timeout_s=5) as cache:

        async def scenario() -> None:
            assert (await cache.aget_all(wanted)) == [b"old %d" % i for i in range(20)]
            assert (await cache.aget_all(wanted)) == [b"old %d" % i for i in range(20)]
            write_raw(memcached_server.address, prefix, {wanted[3]: b"new"})
            assert (await cache.aget_all(wanted)) == [b"new" if i == 3 else b"old %d" % i for i in range(20)]
            write_raw(memcached_server.address, prefix, {wanted[3]: b"old 3"})  # the old bytes, a new CAS
            assert (await cache.aget_all(wanted)) == [b"old %d" % i for i in range(20)]
            with raw_client(memcached_server.address) as client:
                client.delete(memcached_key(prefix, wanted[7]))
            started = time.monotonic()
            assert await cache.aget_all(wanted) is None
            assert time.monotonic() - started < 1  # a shorter answer than the one expected: no timeout
            assert (await cache.aget_many(wanted)).keys() == set(wanted) - {wanted[7]}

        asyncio.run(scenario())
        assert (cache.stats().errors, cache.stats().timeouts) == (0, 0)


def test_another_keys_value_under_the_same_name_is_a_miss(memcached_server, prefix):
    mine, other = CacheKey("seg-a", b"mine"), CacheKey("seg-b", b"other")
    with raw_client(memcached_server.address) as client:
        client.set(memcached_key(prefix, mine), frame(other, b"NOT YOURS"))
    with MemcachedCache(memcached_server.address, prefix=prefix) as cache:
        assert asyncio.run(cache.aget_many([mine])) == {}
        assert cache.stats().collisions == 1


def test_a_restarted_server_counting_its_cas_again_is_read_anew(prefix):
    """A fresh memcached gives the first item it stores CAS 1 again: the same CAS, another value."""
    port = free_port()
    server = MemcachedServer(port=port).start()
    key = CacheKey("seg", b"k")
    try:
        with MemcachedCache(server.address, prefix=prefix, retry_interval_s=0.05) as cache:
            write_raw(server.address, prefix, {key: b"before"})
            assert asyncio.run(cache.aget_all([key])) == [b"before"]
            server.stop()
            server = MemcachedServer(port=port).start()
            write_raw(server.address, prefix, {key: b"after!"})
            got: list[bytes] | None = None
            for _ in range(100):  # the first read may meet the dead connection and trip the breaker
                got = asyncio.run(cache.aget_all([key]))
                if got is not None:
                    break
                time.sleep(0.05)
            assert got == [b"after!"]
    finally:
        server.stop()


def test_a_server_without_cas_is_read_in_full_every_time(prefix):
    server = MemcachedServer(port=free_port(), extra_args=("-C",)).start()
    key = CacheKey("seg", b"k")
    try:
        with MemcachedCache(server.address, prefix=prefix) as cache:
            for value in (b"one", b"two", b"three"):
                write_raw(server.address, prefix, {key: value})
                assert asyncio.run(cache.aget_all([key])) == [value]
                assert asyncio.run(cache.aget_all([key])) == [value]
    finally:
        server.stop()


def test_several_servers_read_where_pymemcache_wrote(memcached_server, prefix):
    second = MemcachedServer(port=free_port()).start()
    try:
        servers = f"{memcached_server.address},{second.address}"
        items = {k: b"partial of " + k.namespace.encode() for k in keys(40)}
        with MemcachedCache(servers, prefix=prefix) as writer:
            writer.put_many(items)  # pymemcache, each key on its rendezvous server
        on_second = {k for k in items if raw_get(second.address, prefix, k) is not None}
        assert 0 < len(on_second) < len(items)
        reversed_list = [second.address, memcached_server.address]
        with MemcachedCache(reversed_list, prefix=prefix) as reader:
            assert asyncio.run(reader.aget_all(list(items))) == list(items.values())
            assert asyncio.run(reader.aget_all(list(items))) == list(items.values())
        second.kill()
        with MemcachedCache(servers, prefix=prefix, retry_interval_s=60) as reader:
            assert asyncio.run(reader.aget_all(list(items))) is None
            assert asyncio.run(reader.aget_many(list(items))).keys() == set(items) - on_second
            assert reader.breaker_status()[second.address]["state"] == "open"
    finally:
        second.stop()


def raw_get(address: str, prefix: str, key: CacheKey) -> bytes | None:
    with raw_client(address) as client:
        value: bytes | None = client.get(memcached_key(prefix, key))
        return value


def test_reads_move_between_event_loops_and_survive_a_cancelled_one(memcached_server, prefix):
    items = {k: b"v%d" % i for i, k in enumerate(keys(10))}
    write_raw(memcached_server.address, prefix, items)
    with MemcachedCache(memcached_server.address, prefix=prefix) as cache:
        for _ in range(3):  # one loop each
            assert asyncio.run(cache.aget_all(list(items))) == list(items.values())

        async def cancelled() -> None:
            read = asyncio.create_task(cache.aget_all(list(items)))
            await asyncio.sleep(0)
            read.cancel()
            with pytest.raises(asyncio.CancelledError):
                await read
            assert await cache.aget_all(list(items)) == list(items.values())

        asyncio.run(cancelled())
        assert cache.stats().errors == 0


@dataclass
class Scripted:
    """A loopback server that answers `stats` as memcached `version` would and every other request
    as `answer(request, conn)` does; it serves until closed (daemon threads, sockets closed)."""

    answer: Callable[[bytes, socket.socket], None]
    version: str = "1.6.18"

    def __post_init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self.listener.getsockname()[1]}"
        self.requests: list[bytes] = []
        self._conns: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                conn, _ = self.listener.accept()
                self._conns.append(conn)
                threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        buffer = b""
        with contextlib.suppress(OSError), conn:
            while data := conn.recv(65536):
                buffer += data
                if buffer == b"stats\r\n":
                    conn.sendall(b"STAT pid 4242\r\nSTAT uptime 10\r\nSTAT time 1000\r\n"
                                 b"STAT version %s\r\nEND\r\n" % self.version.encode())  # fmt: skip
                    buffer = b""
                elif buffer.endswith(b"mn\r\n" if buffer.startswith(b"mg ") else b"\r\n"):
                    self.requests.append(buffer)
                    request, buffer = buffer, b""
                    self.answer(request, conn)

    def close(self) -> None:
        self.listener.close()
        for conn in self._conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            conn.close()


@contextlib.contextmanager
def scripted(answer: Callable[[bytes, socket.socket], None], version: str = "1.6.18") -> Iterator[Scripted]:
    server = Scripted(answer, version)
    try:
        yield server
    finally:
        server.close()


def test_a_server_closing_mid_response_reads_as_misses_and_opens_the_breaker(prefix):
    wanted = keys(3)

    def half_then_close(request: bytes, conn: socket.socket) -> None:
        value = frame(wanted[0], b"x" * 1000)
        conn.sendall(b"VA %d c5\r\n%s" % (len(value), value[:400]))
        conn.shutdown(socket.SHUT_RDWR)

    with (
        scripted(half_then_close) as server,
        MemcachedCache(server.address, prefix=prefix, retry_interval_s=60) as cache,
    ):
        assert asyncio.run(cache.aget_all(wanted)) is None
        assert asyncio.run(cache.aget_many(wanted)) == {}  # the breaker is open: no network
        s = cache.stats()
        assert (s.errors, s.timeouts, s.misses) == (1, 0, 3)
        assert cache.breaker_status()[server.address] == {"state": "open", "trips": 1}
        assert len(server.requests) == 1


def test_a_server_that_never_answers_times_out_without_blocking_the_loop(prefix):
    with (
        scripted(lambda request, conn: None) as server,
        MemcachedCache(server.address, prefix=prefix, timeout_s=0.3) as cache,
    ):

        async def run() -> tuple[int, list[bytes] | None, float]:
            started, ticks = time.monotonic(), 0
            read = asyncio.create_task(cache.aget_all(keys(2)))
            while not read.done():
                ticks += 1
                await asyncio.sleep(0.005)
            return ticks, await read, time.monotonic() - started

        ticks, got, took = asyncio.run(run())
        assert got is None
        assert ticks > 5  # the loop kept running while the read waited
        assert 0.25 < took < 2
        assert cache.stats().timeouts == 1


def test_a_server_older_than_meta_is_read_through_pymemcache(prefix):
    wanted = keys(2)
    stored = {memcached_key(prefix, k): frame(k, b"old server %d" % i) for i, k in enumerate(wanted)}

    def text_protocol(request: bytes, conn: socket.socket) -> None:
        assert request.startswith(b"get ")
        out = b"".join(b"VALUE %s 0 %d\r\n%s\r\n" % (name, len(stored[name.decode()]), stored[name.decode()])
                       for name in request.split()[1:])  # fmt: skip
        conn.sendall(out + b"END\r\n")

    with (
        scripted(text_protocol, version="1.5.22") as server,
        MemcachedCache(server.address, prefix=prefix) as cache,
    ):
        assert asyncio.run(cache.aget_all(wanted)) == [b"old server 0", b"old server 1"]
        placed = 0
        place = cache._place

        def counted(key: CacheKey) -> tuple[str, str, bytes]:
            nonlocal placed
            placed += 1
            return place(key)

        cache._place = counted  # type: ignore[method-assign]
        assert asyncio.run(cache.aget_all(wanted)) == [b"old server 0", b"old server 1"]
        assert placed == 0  # the same key list: its split over the servers, names and headers are known
        assert cache.stats().errors == 0
        assert [r[:4] for r in server.requests] == [b"get ", b"get "]


def test_known_values_keep_to_their_bound_and_forget_proven_batches_when_one_leaves():
    known = KnownValues(max_bytes=10)
    a, b, c = keys(3)
    batch = ReadBatch([a, b], [b"ka", b"kb"], [b"", b""], [0, 1])
    known.put(a, b"c1", b"aaaa")
    known.put(b, b"c2", b"bbbb")
    known.prove(batch, [b"c1", b"c2"], [b"aaaa", b"bbbb"])
    assert id(batch) in known.proven
    known.prove(ReadBatch([a, c], [b"ka", b"kc"], [b"", b""], [0, 1]), [b"c1", b"c3"], [b"aaaa", b"cc"])
    assert len(known.proven) == 1  # c is not held: that batch is not proven
    known.put(c, b"c3", b"cccc")  # 12 bytes > 10: the oldest, a, leaves
    assert list(known.entries) == [b, c] and known.size == 8
    assert known.proven == {}
    known.put(b, b"c4", b"x" * 11)  # larger than the whole bound: not held, the old b kept
    assert known.entries[b] == (b"c2", b"bbbb")
