"""The broker's reads from one memcached server: on the event loop, and on a repeat without the values.

A warm query reads the same hundred partials again and again, and reading ~110 KB through
pymemcache on a thread cost ~8x the whole bare-framework request. Here a read is one write of
meta-protocol `mg` lines and one response split in one pass (cache.meta_protocol), and a value
already read is not read again: its key is asked only for its CAS (`mg <key> c`, a few bytes),
and when the CAS is the one it had, the value read then is the value now (memcached gives every
store of an item a new CAS, so an item another broker replaced, or one evicted and written again,
has another). When every key of a batch still has its CAS, the response is byte for byte the one
the last read proved, and is compared whole, not parsed.

The values read are held in `KnownValues`, bounded by bytes (oldest first out), per server
process: a CAS is only comparable within one memcached process (`stats` pid and start time,
checked on every new connection; a restarted server starts its CAS over and empties the held
values). This is no second cache level: nothing is answered without memcached confirming it now.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from functools import partial

from cache.base import CacheKey
from cache.meta_connection import UNCHANGED, MetaConnection, ServerIdentity, open_connection
from cache.meta_protocol import (
    END,
    Answer,
    check_line,
    parse,
    provable,
    read_line,
    request,
    unchanged_response,
)
from cache.shared_reads import SharedReads


class MetaUnsupported(Exception):
    """The server is older than memcached 1.6: no meta protocol."""


PROVEN_BATCHES = 256  # batches whose whole unchanged answer is remembered (a dashboard's panels)


class KnownValues:
    """Values read from one server process, with the CAS each had, bounded by their bytes (oldest
    out first), and the batches whose every value is held: (the batch, its check-only request, the
    response to it when nothing changed, the values). Those are forgotten whenever a held value
    leaves or is replaced, so they never keep a value past the bound."""

    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self.size = 0
        self.entries: dict[CacheKey, tuple[bytes, bytes]] = {}  # key -> (CAS token, value)
        self.proven: dict[int, tuple[ReadBatch, bytes, bytes, list[bytes | None]]] = {}  # by id(batch)

    def put(self, key: CacheKey, cas: bytes, value: bytes) -> None:
        if len(value) > self.max_bytes:
            return
        entries = self.entries
        old = entries.pop(key, None)
        if old is not None:
            self.size -= len(old[1])
            self.proven.clear()
        while entries and self.size + len(value) > self.max_bytes:
            self.size -= len(entries.pop(next(iter(entries)))[1])
            self.proven.clear()
        entries[key] = (cas, value)
        self.size += len(value)

    def prove(self, batch: ReadBatch, tokens: list[bytes], values: list[bytes | None]) -> None:
        """Remember the batch's answer if every value is held with that CAS."""
        get = self.entries.get
        if any(get(key, (None,))[0] != cas for key, cas in zip(batch.keys, tokens, strict=True)):
            return
        if len(self.proven) >= PROVEN_BATCHES:
            self.proven.clear()
        self.proven[id(batch)] = (batch, request(batch.check_lines), unchanged_response(tokens), values)

    def clear(self) -> None:
        self.entries.clear()
        self.proven.clear()
        self.size = 0


class ReadBatch:
    """One server's share of a key list (`positions`: where each key stands in the list)."""

    __slots__ = ("_by_name", "check_lines", "headers", "keys", "mkeys", "positions", "read_lines")

    def __init__(self, keys: list[CacheKey], mkeys: list[bytes], headers: list[bytes], positions: list[int]):
        self.keys, self.mkeys, self.headers, self.positions = keys, mkeys, headers, positions
        self.check_lines = [check_line(m) for m in mkeys]
        self.read_lines = [read_line(m) for m in mkeys]
        self._by_name: dict[str, tuple[CacheKey, bytes]] | None = None

    def by_name(self) -> dict[str, tuple[CacheKey, bytes]]:
        """Memcached key -> (key, frame header), what a read through pymemcache (a server older than
        the meta protocol) is checked against: built once per batch, which `_plan` remembers."""
        if self._by_name is None:
            self._by_name = {m.decode("ascii"): (k, h) for m, k, h in zip(self.mkeys, self.keys, self.headers,
                                                                         strict=True)}  # fmt: skip
        return self._by_name


def split_by_server(
    keys: Sequence[CacheKey], place: Callable[[CacheKey], tuple[str, str, bytes]]
) -> list[tuple[str, ReadBatch]]:
    """Each server's batch of `keys`; `place(key)`: (server, memcached key, frame header)."""
    shares: defaultdict[str, tuple[list[CacheKey], list[bytes], list[bytes], list[int]]]
    shares = defaultdict(lambda: ([], [], [], []))
    for at, key in enumerate(keys):
        server, mkey, header = place(key)
        share = shares[server]
        share[0].append(key)
        share[1].append(mkey.encode("ascii"))
        share[2].append(header)
        share[3].append(at)
    return [(server, ReadBatch(*share)) for server, share in shares.items()]


# what one server read gives: values in the batch's order (None: absent), how many were found,
# how many were another key's value under the same memcached name (read as misses)
BatchValues = tuple[list[bytes | None], int, int]


class ServerReads:
    """Reads from one server: its idle connections, the identity of the process they reach, and
    the values held for it."""

    def __init__(self, address: tuple[str, int], max_idle: int, known_bytes: int):
        self.address = address
        self.max_idle = max_idle
        self.identity: ServerIdentity | None = None
        self.speaks_meta = True  # until a server older than 1.6 is met (then pymemcache reads it)
        self.known = KnownValues(known_bytes)
        self._idle: list[MetaConnection] = []
        self._shared: SharedReads[BatchValues] = SharedReads()
        self._closed = False

    async def read(self, batch: ReadBatch, deadline: float) -> BatchValues:
        """The batch's values; raises what the connection raises (the caller fails open). Reads
        of one batch at the same time share round trips (cache.shared_reads)."""
        (values, found, collisions), own = await self._shared.read(
            batch, partial(self._read, batch), deadline
        )
        return values, found, collisions if own else 0

    async def _read(self, batch: ReadBatch, deadline: float) -> BatchValues:
        conn = await self._acquire(deadline)
        try:
            result = await self._exchange(conn, batch, deadline)
        except BaseException:
            conn.close()  # its stream is somewhere in a response
            raise
        self._release(conn)
        return result

    async def _exchange(self, conn: MetaConnection, batch: ReadBatch, deadline: float) -> BatchValues:
        proven = self.known.proven.get(id(batch))
        if proven is not None and proven[0] is batch:
            answers = await conn.exchange(proven[1], END, parse, deadline, expected=proven[2])
            if answers is UNCHANGED:
                values = proven[3]
                return values, len(values), 0
        else:
            known = self.known.entries
            asked = zip(batch.keys, batch.check_lines, batch.read_lines, strict=True)
            lines = [check if key in known else read for key, check, read in asked]
            answers = await conn.exchange(request(lines), END, parse, deadline)
        assert isinstance(answers, list)
        return await self._settle(conn, batch, answers, deadline)

    async def _settle(
        self, conn: MetaConnection, batch: ReadBatch, answers: list[Answer], deadline: float
    ) -> BatchValues:
        """The values of a general response: checked keys from the held values when their CAS is
        the one held, read again when not (a second exchange, rare)."""
        if len(answers) != len(batch.keys):
            raise ConnectionResetError(f"memcached answered {len(answers)} of {len(batch.keys)} keys")
        if conn.identity is not self.identity:
            raise ConnectionResetError("memcached restarted during the read")
        values: list[bytes | None] = [None] * len(answers)
        tokens: list[bytes] = [b""] * len(answers)
        stale: list[int] = []
        collisions = self._take(batch, answers, range(len(answers)), values, tokens, stale)
        if stale:
            lines = [batch.read_lines[i] for i in stale]
            again = await conn.exchange(request(lines), END, parse, deadline)
            assert isinstance(again, list)
            if len(again) != len(stale) or any(a is not None and a[1] is None for a in again):
                raise ConnectionResetError("memcached answered a value read without its value")
            collisions += self._take(batch, again, stale, values, tokens, [])
        found = len(values) - values.count(None)
        if found == len(values):
            self.known.prove(batch, tokens, values)
        return values, found, collisions

    def _take(
        self, batch: ReadBatch, answers: Sequence[Answer], at: Sequence[int],
        values: list[bytes | None], tokens: list[bytes], stale: list[int],
    ) -> int:  # fmt: skip
        """Answers into `values` (at the batch positions `at`); checked keys whose CAS is not the
        one held go to `stale`. Returns the collisions."""
        known, collisions = self.known, 0
        for i, answer in zip(at, answers, strict=True):
            if answer is None:
                continue
            cas, stored = answer
            key = batch.keys[i]
            if stored is None:
                held = known.entries.get(key)
                if held is not None and held[0] == cas:
                    values[i], tokens[i] = held[1], cas
                else:
                    stale.append(i)
                continue
            header = batch.headers[i]
            if not stored.startswith(header):
                collisions += 1  # another key's value under this name: a miss
                continue
            value = stored[len(header) :]
            values[i], tokens[i] = value, cas
            if provable(cas):
                known.put(key, cas, value)
        return collisions

    async def _acquire(self, deadline: float) -> MetaConnection:
        while self._idle:
            conn = self._idle.pop()
            if not conn.closed and conn.identity is self.identity:
                return conn
            conn.close()
        conn = await open_connection(self.address, deadline)
        identity = conn.identity
        assert identity is not None
        if identity == self.identity:
            conn.identity = self.identity  # the same object: compared by `is` from here on
        else:
            self.identity = identity
            self.known.clear()  # another process: its CAS say nothing about the values held
        if not identity.speaks_meta:
            conn.close()
            self.speaks_meta = False
            raise MetaUnsupported(f"memcached {identity.version} has no meta protocol (1.6 on)")
        return conn

    def _release(self, conn: MetaConnection) -> None:
        if len(self._idle) < self.max_idle and not conn.closed and not self._closed:
            self._idle.append(conn)
        else:
            conn.close()

    def reset(self) -> None:
        """Close the idle connections (after a failure they are suspect); the next read connects
        afresh and asks again which memcached answers."""
        self.speaks_meta = True
        idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    def close(self) -> None:
        """Close the idle connections and those in use as their reads end."""
        self._closed = True
        self.reset()
        self.known.clear()
