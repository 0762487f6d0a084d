"""Memcached backend shared by every broker: keys spread over several servers, failing open.

A cache must never make a query fail or wait long: when a server is slow or gone, its keys read as
misses and its puts are dropped; errors and timeouts are counted and logged at most once per
interval. Each server has a circuit breaker: the first failure opens it, and while it is open no
query touches that server (no connect, no timeout, not even a thread hop when every server is
open); a background thread probes it every `retry_interval` seconds (`version` with the connect
timeout) and closes the breaker when it answers, so the cache recovers by itself when memcached
comes back. State and trips are published per server (`breaker_status`).

Why not pymemcache's HashClient: with `ignore_exc=True` it hides every error (nothing to count);
with `ignore_exc=False` one failing server throws away the other servers' answers for the whole
call, it only marks a server failed on OSError, and it visits the servers one after the other. Here
each server gets its own PooledClient, keys are placed by rendezvous hashing as HashClient does
(see `placement`; independent of server order, so brokers listing the servers differently still
agree).

pymemcache writes (on the cache's I/O threads, all servers in parallel with `parallel_fanout`) and
serves the sync API. The broker's reads (`aget_many`, `aget_all`) run on the event loop itself,
all servers at once, through `memcached_reads`: one meta-protocol write and one response per
server, and a value read before is only confirmed by its CAS, not read again (a server older than
1.6 is read through pymemcache instead). Both place a key on the same server.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from pymemcache.client.base import Client, PooledClient
from pymemcache.exceptions import MemcacheServerError

from cache.base import CacheKey, ResultCache
from cache.memcached_format import frame, frame_header, memcached_key, unframe, validate_prefix
from cache.memcached_reads import MetaUnsupported, ReadBatch, ServerReads, split_by_server
from cache.placement import RendezvousPlacement
from cache.stats import CacheStats, StatsCounter

log = logging.getLogger(__name__)

ITEM_SIZE_MAX = 1024 * 1024  # memcached's default -I
ITEM_OVERHEAD = 1024  # header + key + suffix, rounded up generously
DEFAULT_EXPIRE_S = 2_592_000  # 30 days, as Druid
# keys whose memcached name, server and value header are remembered: two SHA-1s and a frame header
# per key cost ~2 µs, a fifth of a 100-segment warm read's own work; cleared whole when full
PLACED_KEYS = 16_384
READ_PLANS = 256  # key lists whose split over the servers is remembered (a dashboard's panels)
# values read, held to be confirmed by their CAS instead of read again (split over the servers)
KNOWN_VALUES_BYTES = 32 * 1024 * 1024
# reads' connections kept open per server: one per query in flight, up to this many reused
IDLE_READ_CONNECTIONS = 16

_Placed = tuple[str, str, bytes]  # server name, memcached key, frame header


def parse_servers(spec: str | Sequence[str]) -> list[tuple[str, int]]:
    """`"h:p,h:p"` (or a list of `"h:p"`) into (host, port) pairs; the port defaults to 11211."""
    items = spec.split(",") if isinstance(spec, str) else list(spec)
    servers: list[tuple[str, int]] = []
    for raw in (s.strip() for s in items):
        if not raw:
            continue
        host, sep, port_text = raw.rpartition(":")
        if not sep or host.endswith(":"):  # no port, or a bare IPv6 address
            host, port_text = raw, "11211"
        host = host.strip("[]")
        if not host or not port_text.isdigit() or not 0 < int(port_text) < 65536:
            raise ValueError(f"bad memcached server {raw!r}; expected HOST:PORT")
        servers.append((host, int(port_text)))
    if not servers:
        raise ValueError("no memcached servers given; expected HOST:PORT[,HOST:PORT...]")
    return sorted(set(servers))


class _ThrottledLog:
    """A warning at most once per interval, saying how many were suppressed since the last one."""

    def __init__(self, interval_s: float):
        self.interval_s = interval_s
        self._last = -float("inf")
        self._suppressed = 0
        self._lock = threading.Lock()

    def warning(self, message: str) -> None:
        with self._lock:
            now = time.monotonic()
            if now - self._last < self.interval_s:
                self._suppressed += 1
                return
            suppressed, self._suppressed, self._last = self._suppressed, 0, now
        more = f" ({suppressed} similar suppressed)" if suppressed else ""
        log.warning("%s%s", message, more)


class _OwnKeysClient(Client):  # type: ignore[misc]  # pymemcache has no type hints
    """pymemcache's client for the keys `memcached_key` makes (a checked prefix and two SHA-1 hex
    digests: ASCII, no space, under 250 bytes), without its check of each key again (~0.4 µs a
    key, a tenth of a hundred-key read)."""

    def check_key(self, key: str | bytes, key_prefix: bytes) -> bytes:
        return key_prefix + (key if isinstance(key, bytes) else key.encode("ascii"))


class _Pool(PooledClient):  # type: ignore[misc]
    client_class = _OwnKeysClient


class _Server:
    """One memcached server: its connection pool and its circuit breaker."""

    def __init__(self, address: tuple[str, int], timeout_s: float, pool_size: int, known_bytes: int):
        self.address = address
        self.reads = ServerReads(address, IDLE_READ_CONNECTIONS, known_bytes)
        self.name = f"{address[0]}:{address[1]}"
        self._timeout_s = timeout_s
        self._pool_size = pool_size
        self.open = False  # the breaker: True while the server is skipped
        self.trips = 0
        self._lock = threading.Lock()
        self._closed = threading.Event()  # the cache was closed: probes end
        self.client = self._connect()

    def _connect(self) -> PooledClient:
        return _Pool(
            self.address,
            connect_timeout=self._timeout_s,
            timeout=self._timeout_s,
            no_delay=True,
            max_pool_size=self._pool_size,
            default_noreply=False,
        )

    def available(self) -> bool:
        return not self.open

    def trip(self, probe_interval_s: float) -> bool:
        """Open the breaker (once) and start probing; False when it was already open."""
        with self._lock:
            if self.open or self._closed.is_set():
                return False
            self.open = True
            self.trips += 1
        threading.Thread(target=self._probe, args=(probe_interval_s,), name=f"memcached-probe-{self.name}",
                         daemon=True).start()  # fmt: skip
        return True

    def _probe(self, interval_s: float) -> None:
        while not self._closed.wait(max(interval_s, 0.05)):  # never a busy loop
            if self._answers():
                # after a restart every pooled socket is stale: start from a fresh pool
                old, self.client = self.client, self._connect()
                old.close()
                self.open = False
                log.warning("memcached %s answers again: cache on", self.name)
                return

    def _answers(self) -> bool:
        try:
            with socket.create_connection(self.address, timeout=self._timeout_s) as conn:
                conn.sendall(b"version\r\n")
                return conn.recv(64).startswith(b"VERSION")
        except OSError:
            return False

    def close(self) -> None:
        self._closed.set()
        self.client.close()
        self.reads.close()


class MemcachedCache(ResultCache):
    blocking = True

    def __init__(
        self,
        servers: str | Sequence[str],
        prefix: str = "strata",
        timeout_s: float = 0.5,
        retry_interval_s: float = 1.0,
        expire_s: int = DEFAULT_EXPIRE_S,
        max_value_size: int = ITEM_SIZE_MAX - ITEM_OVERHEAD,
        log_interval_s: float = 30.0,
        io_threads: int = 4,
        parallel_fanout: bool = False,
        known_values_bytes: int = KNOWN_VALUES_BYTES,
    ):
        if timeout_s <= 0 or retry_interval_s < 0 or max_value_size <= 0 or io_threads <= 0:
            raise ValueError("memcached timeout, value size and io_threads must be positive")
        if known_values_bytes < 0:
            raise ValueError("memcached known_values_bytes must not be negative")
        self.prefix = validate_prefix(prefix)
        self.timeout_s = timeout_s
        self.retry_interval_s = retry_interval_s
        self.expire_s = expire_s
        self.max_value_size = max_value_size
        self.io_threads = io_threads
        self.parallel_fanout = parallel_fanout
        addresses = parse_servers(servers)
        known_bytes = known_values_bytes // len(addresses)
        self._servers = {
            s.name: s for s in (_Server(a, timeout_s, io_threads, known_bytes) for a in addresses)
        }
        self._placement = RendezvousPlacement(list(self._servers))
        self._counters = StatsCounter()
        self._error_log = _ThrottledLog(log_interval_s)
        self._placed: dict[CacheKey, _Placed] = {}
        self._plans: dict[int, tuple[Sequence[CacheKey], list[tuple[_Server, ReadBatch]]]] = {}

    @property
    def server_names(self) -> list[str]:
        return list(self._servers)

    def _server_for(self, mkey: str) -> _Server:
        return self._servers[self._placement.node_for(mkey)]

    def _place(self, key: CacheKey) -> _Placed:
        placed = self._placed.get(key)
        if placed is None:
            mkey = memcached_key(self.prefix, key)
            if len(self._placed) >= PLACED_KEYS:
                self._placed.clear()
            placed = self._placed[key] = (self._server_for(mkey).name, mkey, frame_header(key))
        return placed

    def _by_server(self, keys: Sequence[CacheKey]) -> dict[str, dict[str, tuple[CacheKey, bytes]]]:
        """Per server: memcached key -> (key, its frame header)."""
        batches: defaultdict[str, dict[str, tuple[CacheKey, bytes]]] = defaultdict(dict)
        place = self._place
        for key in keys:
            server, mkey, header = place(key)
            batches[server][mkey] = (key, header)
        return batches

    def _failed(self, server: _Server, action: str, error: Exception) -> None:
        self._counters.add("timeouts" if isinstance(error, TimeoutError) else "errors")
        if server.trip(self.retry_interval_s):
            log.warning(
                "memcached %s %s failed (%s: %s): breaker open, serving misses, probing every %gs",
                server.name, action, type(error).__name__, error, self.retry_interval_s,
            )  # fmt: skip
        else:
            self._error_log.warning(f"memcached {server.name} {action} failed ({type(error).__name__})")

    def available(self) -> bool:
        """False while every server's breaker is open: callers can skip the cache altogether."""
        return any(s.available() for s in self._servers.values())

    def breaker_status(self) -> dict[str, dict[str, Any]]:
        return {name: {"state": "open" if s.open else "closed", "trips": s.trips}
                for name, s in self._servers.items()}  # fmt: skip

    def _fetch(self, server_name: str, wanted: dict[str, tuple[CacheKey, bytes]]) -> dict[CacheKey, bytes]:
        server = self._servers[server_name]
        if not server.available():
            return {}
        try:
            stored = server.client.get_many(list(wanted))
        except Exception as e:  # fail open: any failure of the cache is a miss
            self._failed(server, "get", e)
            return {}
        found: dict[CacheKey, bytes] = {}
        collisions = 0
        for mkey, data in stored.items():
            asked = wanted.get(mkey)
            value = None if asked is None else unframe(asked[0], data, asked[1])
            if asked is None or value is None:
                collisions += 1
            else:
                found[asked[0]] = value
        self._counters.add("collisions", collisions)
        return found

    def _store(self, server_name: str, framed: dict[str, bytes]) -> None:
        server = self._servers[server_name]
        if not server.available():
            return
        try:
            not_stored = server.client.set_many(framed, expire=self.expire_s, noreply=False)
        except MemcacheServerError as e:
            if "too large" in str(e):
                self._counters.add("put_skipped_too_large")  # the server's -I is below our limit
                return
            self._failed(server, "set", e)
            return
        except Exception as e:
            self._failed(server, "set", e)
            return
        self._counters.add("errors", len(not_stored))

    def _count_lookup(self, asked: int, found: int) -> None:
        self._counters.add("hits", found)
        self._counters.add("misses", asked - found)

    def _found(self, keys: Sequence[CacheKey]) -> dict[CacheKey, bytes]:
        """The values of the keys present, each server asked in turn; hits and misses not counted."""
        found: dict[CacheKey, bytes] = {}
        for server_name, wanted in self._by_server(keys).items():
            found.update(self._fetch(server_name, wanted))
        return found

    def get_many(self, keys: Sequence[CacheKey]) -> dict[CacheKey, bytes]:
        found = self._found(keys)
        self._count_lookup(len(keys), len(found))
        return found

    def _framed_by_server(self, items: Mapping[CacheKey, bytes]) -> dict[str, dict[str, bytes]]:
        batches: defaultdict[str, dict[str, bytes]] = defaultdict(dict)
        too_large = 0
        for key, value in items.items():
            server, mkey, header = self._place(key)
            framed = frame(key, value, header)
            if len(framed) > self.max_value_size:
                too_large += 1
                continue
            batches[server][mkey] = framed
        self._counters.add("put_skipped_too_large", too_large)
        return batches

    def put_many(self, items: Mapping[CacheKey, bytes]) -> None:
        for server_name, framed in self._framed_by_server(items).items():
            self._store(server_name, framed)

    async def aget_many(self, keys: Sequence[CacheKey]) -> dict[CacheKey, bytes]:
        if not keys or not self.available():  # every breaker open: misses, no network
            self._count_lookup(len(keys), 0)
            return {}
        values, found = await self._aread(keys)
        self._count_lookup(len(keys), found)
        return {key: value for key, value in zip(keys, values, strict=True) if value is not None}

    async def aget_all(self, keys: Sequence[CacheKey]) -> list[bytes] | None:
        """One read of every key (one request per server, on the loop), all or none; hits
        counted only when all are found."""
        if not keys or not self.available():
            return [] if not keys else None
        values, found = await self._aread(keys)
        if found != len(keys):
            return None
        self._count_lookup(len(keys), len(keys))
        return values  # type: ignore[return-value]  # none is None: all were found

    async def _aread(self, keys: Sequence[CacheKey]) -> tuple[list[bytes | None], int]:
        """Every key's value in order (None: absent) and how many were found, all servers at once."""
        plan = self._plan(keys)
        deadline = asyncio.get_running_loop().time() + self.timeout_s
        if len(plan) == 1:
            values, found = await self._aread_batch(*plan[0], deadline)
            return list(values), found
        parts = await asyncio.gather(*(self._aread_batch(s, b, deadline) for s, b in plan))
        out: list[bytes | None] = [None] * len(keys)
        for (_, batch), (values, _) in zip(plan, parts, strict=True):
            for at, value in zip(batch.positions, values, strict=True):
                out[at] = value
        return out, sum(found for _, found in parts)

    async def _aread_batch(
        self, server: _Server, batch: ReadBatch, deadline: float
    ) -> tuple[list[bytes | None], int]:
        if not server.available():
            return [None] * len(batch.keys), 0
        if not server.reads.speaks_meta:
            return await self._aread_blocking(server, batch)
        try:
            values, found, collisions = await server.reads.read(batch, deadline)
        except MetaUnsupported:
            return await self._aread_blocking(server, batch)
        except Exception as e:  # fail open: any failure of the cache is a miss
            server.reads.reset()
            self._failed(server, "get", e)
            return [None] * len(batch.keys), 0
        self._counters.add("collisions", collisions)
        return values, found

    async def _aread_blocking(self, server: _Server, batch: ReadBatch) -> tuple[list[bytes | None], int]:
        """A server without the meta protocol: pymemcache's `get` on the I/O pool."""
        found = await self.run_blocking(self._fetch, server.name, batch.by_name())
        return [found.get(key) for key in batch.keys], len(found)

    def _plan(self, keys: Sequence[CacheKey]) -> list[tuple[_Server, ReadBatch]]:
        """The keys split by server, remembered for the same list of keys (a warm query's)."""
        known = self._plans.get(id(keys))
        if known is not None and known[0] is keys:
            return known[1]
        plan = [(self._servers[name], batch) for name, batch in split_by_server(keys, self._place)]
        if len(self._plans) >= READ_PLANS:
            self._plans.clear()
        self._plans[id(keys)] = (keys, plan)
        return plan

    async def aput_many(self, items: Mapping[CacheKey, bytes]) -> None:
        if not self.available():
            return
        if not self.parallel_fanout:
            return await self.run_blocking(self.put_many, dict(items))
        batches = self._framed_by_server(items)
        await asyncio.gather(*(self.run_blocking(self._store, s, f) for s, f in batches.items()))

    def close_namespace(self, namespace: str) -> None:
        """Memcached cannot enumerate a namespace; entries of a removed segment just age out (LRU)."""

    def stats(self) -> CacheStats:
        return self._counters.snapshot()

    def close(self) -> None:
        for server in self._servers.values():
            server.close()
        super().close()
