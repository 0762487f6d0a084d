"""One connection to a memcached server for the broker's event loop: a request written, its whole
response read, no thread hop.

The socket is ours, non-blocking, and watched with `add_reader` on whichever loop runs the
exchange (moved to another loop when one ends and another starts, as tests do with
`asyncio.run`), so it can be closed from anywhere. Chunks are joined once, when the response
looks finished (ends with the terminator); a response byte-equal to the one expected settles
without being parsed at all (the warm read's "nothing changed"). Any trouble (a timeout, the
server closing, an answer that does not parse, the awaiting task cancelled) closes the
connection: its stream position is unknown from then on.

On connecting, `identify` asks `stats` for the server's pid, start time and version: a CAS is only
comparable with another from the same server process (a restarted memcached counts from 1 again).
"""

from __future__ import annotations

import asyncio
import socket
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from cache.meta_protocol import ProtocolError

T = TypeVar("T")
RECV_SIZE = 256 * 1024
TICK_S = 0.002  # how often a loop's exchanges in flight are checked for their deadlines
STATS_END = b"END\r\n"


class Unchanged:
    """The response was byte for byte the one expected."""


UNCHANGED = Unchanged()


@dataclass(frozen=True)
class ServerIdentity:
    """One memcached process: pid and start time (`time - uptime`, exact: both count from the
    same clock), and whether it speaks the meta protocol (1.6 on)."""

    pid: int
    started: int
    version: str

    @property
    def speaks_meta(self) -> bool:
        major, _, rest = self.version.partition(".")
        minor = rest.partition(".")[0]
        return major.isdigit() and minor.isdigit() and (int(major), int(minor)) >= (1, 6)


def parse_identity(response: bytes) -> ServerIdentity | None:
    if not response.endswith(STATS_END):
        return None
    stats = {}
    for line in response.split(b"\r\n"):
        parts = line.split(b" ", 2)
        if len(parts) == 3 and parts[0] == b"STAT":
            stats[parts[1]] = parts[2]
    try:
        pid, uptime, now = int(stats[b"pid"]), int(stats[b"uptime"]), int(stats[b"time"])
        return ServerIdentity(pid, now - uptime, stats[b"version"].decode("ascii", "replace"))
    except (KeyError, ValueError):
        raise ProtocolError("memcached stats without pid, uptime, time or version") from None


class _Exchange(Generic[T]):
    __slots__ = ("chunks", "deadline", "ends", "expected", "parse", "waiter", "whole_until")

    def __init__(self, waiter: asyncio.Future[T | Unchanged], ends: bytes,
                 parse: Callable[[bytes], T | None], expected: bytes | None, deadline: float):  # fmt: skip
        self.waiter, self.ends, self.parse, self.expected = waiter, ends, parse, expected
        self.deadline = deadline
        self.whole_until = -1.0  # till then the socket wakes the loop only once `expected` is in
        self.chunks: list[bytes] = []


class _Watchdog:
    """One timer per event loop for every exchange in flight on it, ticking only while there are
    some: a timer per exchange (scheduled, then cancelled) cost ~5 µs of a ~45 µs warm read."""

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self._loop = loop
        self._watched: set[MetaConnection] = set()
        self._timer: asyncio.TimerHandle | None = None

    def watch(self, conn: MetaConnection) -> None:
        self._watched.add(conn)
        if self._timer is None:
            self._timer = self._loop.call_later(TICK_S, self._tick)

    def unwatch(self, conn: MetaConnection) -> None:
        self._watched.discard(conn)

    def _tick(self) -> None:
        now = self._loop.time()
        for conn in list(self._watched):
            conn.check(now)
        self._timer = self._loop.call_later(TICK_S, self._tick) if self._watched else None


_watchdogs: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Watchdog] = weakref.WeakKeyDictionary()


def _watchdog(loop: asyncio.AbstractEventLoop) -> _Watchdog:
    watchdog = _watchdogs.get(loop)
    if watchdog is None:
        watchdog = _watchdogs[loop] = _Watchdog(loop)
    return watchdog


class MetaConnection:
    """A connected socket, one exchange at a time; `identity` is the server's, set by `identify`."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.identity: ServerIdentity | None = None
        self.closed = False
        self._fd = sock.fileno()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._watchdog: _Watchdog | None = None
        self._exchange: _Exchange[Any] | None = None
        self._lowat = 1  # SO_RCVLOWAT: bytes in before the socket reads as readable

    async def exchange(self, request: bytes, ends: bytes, parse: Callable[[bytes], T | None],
                       deadline: float, expected: bytes | None = None) -> T | Unchanged:  # fmt: skip
        """Send `request`, wait for the response; UNCHANGED when it equals `expected`, else what
        `parse` makes of it (it returns None while the response is incomplete). Raises OSError,
        TimeoutError or ProtocolError, the connection then closed.

        With `expected`, the loop is not woken before that many bytes are in (SO_RCVLOWAT):
        memcached answers a hundred keys in several writes, and each wake-up costs more than the
        whole comparison. A shorter response (a key gone) is taken at a watchdog tick 2-4 ms on."""
        if self.closed:
            raise ConnectionResetError("memcached connection closed")
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            self._watch(loop)
        assert self._watchdog is not None
        waiter: asyncio.Future[T | Unchanged] = loop.create_future()
        exchange = self._exchange = _Exchange(waiter, ends, parse, expected, deadline)
        if expected is not None and len(expected) > 1:
            self._wait_for(len(expected))
            exchange.whole_until = loop.time() + TICK_S
        else:
            self._wait_for(1)
        self._watchdog.watch(self)
        try:
            try:
                sent = self.sock.send(request)
            except (BlockingIOError, InterruptedError):
                sent = 0
            if sent < len(request):  # the socket's buffer is full: the rest when it drains
                await loop.sock_sendall(self.sock, request[sent:])
            return await waiter
        except BaseException:
            self.close()
            raise
        finally:
            self._watchdog.unwatch(self)
            self._exchange = None

    def _wait_for(self, size: int) -> None:
        if size != self._lowat:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, size)
            self._lowat = size

    def check(self, now: float) -> None:
        """The watchdog's tick: past its deadline the exchange fails; a response awaited whole is
        taken as it is (it may be shorter), any byte waking the loop from then on."""
        exchange = self._exchange
        if exchange is None or self.closed:
            return
        if now >= exchange.deadline:
            self._fail(TimeoutError("memcached did not answer in time"))
            return
        if 0 <= exchange.whole_until <= now and self._wake_on_any_byte(exchange):
            self._readable()

    def _wake_on_any_byte(self, exchange: _Exchange[Any]) -> bool:
        """Stop waiting for the response expected whole; False when the connection failed."""
        exchange.whole_until = -1.0
        try:
            self._wait_for(1)
        except OSError as e:
            self._fail(e)
            return False
        return True

    async def identify(self, deadline: float) -> ServerIdentity:
        identity = await self.exchange(b"stats\r\n", STATS_END, parse_identity, deadline)
        assert isinstance(identity, ServerIdentity)
        self.identity = identity
        return identity

    def _watch(self, loop: asyncio.AbstractEventLoop) -> None:
        old, self._loop = self._loop, loop
        self._watchdog = _watchdog(loop)
        if old is not None and not old.is_closed():  # a finished loop's selector is closed with it
            old.remove_reader(self._fd)
        loop.add_reader(self._fd, self._readable)

    def _readable(self) -> None:
        try:
            data = self.sock.recv(RECV_SIZE)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as e:
            self._fail(e)
            return
        exchange = self._exchange
        if not data:
            self._fail(ConnectionResetError("memcached closed the connection"))
            return
        if exchange is None or exchange.waiter.done():
            self._fail(ProtocolError("memcached sent data nobody asked for"))
            return
        chunks = exchange.chunks
        if not chunks and data == exchange.expected:
            exchange.waiter.set_result(UNCHANGED)
            return
        chunks.append(data)
        # not the response expected: the rest, however short, wakes the loop
        if self._lowat > 1 and not self._wake_on_any_byte(exchange):
            return
        ends = exchange.ends
        if not data.endswith(ends) and (len(data) >= len(ends) or len(chunks) == 1):
            return
        whole = data if len(chunks) == 1 else b"".join(chunks)
        if not whole.endswith(ends):
            return
        if whole == exchange.expected:
            exchange.waiter.set_result(UNCHANGED)
            return
        try:
            result = exchange.parse(whole)
        except (ProtocolError, ValueError) as e:
            self._fail(e if isinstance(e, ProtocolError) else ProtocolError(str(e)))
            return
        if result is not None:
            exchange.waiter.set_result(result)

    def _fail(self, error: Exception) -> None:
        exchange = self._exchange
        self.close()
        if exchange is not None and not exchange.waiter.done():
            exchange.waiter.set_exception(error)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        loop = self._loop
        if loop is not None and loop.is_running() and not _runs_here(loop):
            loop.call_soon_threadsafe(self._release)  # the loop's thread unwatches, then closes
        else:
            self._release()

    def _release(self) -> None:
        loop, self._loop = self._loop, None
        if loop is not None and not loop.is_closed():
            loop.remove_reader(self._fd)
        self.sock.close()


def _runs_here(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


async def open_connection(address: tuple[str, int], deadline: float) -> MetaConnection:
    """A connection to the server whose identity it has asked (see the module)."""
    loop = asyncio.get_running_loop()
    host, port = address
    async with asyncio.timeout_at(deadline):
        family, kind, proto, _, target = (await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM))[0]
        sock = socket.socket(family, kind, proto)
        try:
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            await loop.sock_connect(sock, target)
        except BaseException:
            sock.close()
            raise
    conn = MetaConnection(sock)
    await conn.identify(deadline)
    return conn
