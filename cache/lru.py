"""In-process LRU bounded by bytes held, not by entry count: partial results vary from bytes to MiB.

An entry is charged its value plus its key, so many tiny entries with long keys still respect the
bound. Entries larger than `max_entry_size` are not cached at all (Druid's maxEntrySize): one huge
partial would otherwise flush many small, hot ones.
"""

from __future__ import annotations

import threading
from collections import OrderedDict, defaultdict, deque
from collections.abc import Callable, Mapping, Sequence
from operator import itemgetter

from cache.base import CacheKey, ResultCache
from cache.stats import CacheStats, StatsCounter

DEFAULT_MAX_ENTRY_SIZE = 1_000_000
READ_LISTS = 256  # key lists whose values are remembered between writes (a dashboard's panels)


def charged_size(key: CacheKey, value: bytes) -> int:
    return len(value) + len(key.key) + len(key.namespace)


class _EvictingLRU:
    """Values in recency order, the least recent pushed out to make room (its owner told of each),
    each charged `charged_size`. An OrderedDict's C-level get and move_to_end: a warm query reads
    a hundred keys, and cachetools' Python-level __getitem__ per key was ~10% of the broker's time.
    It maps keys to the values themselves (their size recomputed when they leave), so a read of
    many keys is one C call that returns them.

    A warm query reads the same list of keys again and again, and between two writes their
    values cannot change: `read_all` remembers each list's values until the next write (any
    put, pop or clear forgets them all), and defers moving the keys to the recent end until
    then, since only a write evicts (one move per key per write, not per read).
    """

    def __init__(self, max_bytes: int, on_evict: Callable[[CacheKey], None]):
        self.max_bytes = max_bytes
        self.currsize = 0
        self.entries: OrderedDict[CacheKey, bytes] = OrderedDict()
        self._on_evict = on_evict
        self._read: dict[int, tuple[Sequence[CacheKey], tuple[bytes, ...]]] = {}  # id(keys) -> values
        self._untouched: dict[int, Sequence[CacheKey]] = {}  # key lists read, not yet made recent

    def read_all(self, keys: Sequence[CacheKey]) -> tuple[bytes, ...] | None:
        """Every key's value (at least two keys), or None when one is absent; the caller holds the
        lock. Read keys count as the most recent from the next write on (see the class)."""
        known = self._read.get(id(keys))
        if known is not None and known[0] is keys:
            values = known[1]
        else:
            try:
                values = itemgetter(*keys)(self.entries)
            except KeyError:
                return None
            if len(self._read) >= READ_LISTS:
                self._read.clear()
            self._read[id(keys)] = (keys, values)
        if id(keys) not in self._untouched:
            if len(self._untouched) >= READ_LISTS:
                self._settle()
            self._untouched[id(keys)] = keys
        return values

    def _settle(self) -> None:
        """Before a write: the keys read since the last one made recent, the read values forgotten."""
        touch = self.entries.move_to_end
        for keys in self._untouched.values():
            deque(map(touch, keys), maxlen=0)
        self._untouched.clear()
        self._read.clear()

    def touch(self, key: CacheKey) -> None:
        self.entries.move_to_end(key)

    def put(self, key: CacheKey, value: bytes, size: int) -> None:
        self.pop(key)
        while self.entries and self.currsize + size > self.max_bytes:
            old, old_value = self.entries.popitem(last=False)
            self.currsize -= charged_size(old, old_value)
            self._on_evict(old)
        self.entries[key] = value
        self.currsize += size

    def pop(self, key: CacheKey) -> None:
        self._settle()
        value = self.entries.pop(key, None)
        if value is not None:
            self.currsize -= charged_size(key, value)

    def clear(self) -> None:
        self._untouched.clear()
        self._read.clear()
        self.entries.clear()
        self.currsize = 0

    def __len__(self) -> int:
        return len(self.entries)


class LruCache(ResultCache):
    blocking = False

    def __init__(self, max_bytes: int, max_entry_size: int = DEFAULT_MAX_ENTRY_SIZE):
        if max_bytes <= 0:
            raise ValueError(f"LRU cache size must be positive, got {max_bytes} bytes")
        if max_entry_size <= 0:
            raise ValueError(f"max entry size must be positive, got {max_entry_size}")
        self.max_bytes = max_bytes
        self.max_entry_size = min(max_entry_size, max_bytes)
        self._lock = threading.Lock()
        self._counters = StatsCounter()
        self._by_namespace: defaultdict[str, set[CacheKey]] = defaultdict(set)
        self._lru = _EvictingLRU(max_bytes, self._evicted)

    def _evicted(self, key: CacheKey) -> None:
        self._counters.add("evictions")
        self._forget_in_namespace(key)

    def _forget_in_namespace(self, key: CacheKey) -> None:
        members = self._by_namespace.get(key.namespace)
        if members is not None:
            members.discard(key)
            if not members:
                del self._by_namespace[key.namespace]

    def get_many(self, keys: Sequence[CacheKey]) -> dict[CacheKey, bytes]:
        found: dict[CacheKey, bytes] = {}
        entries = self._lru.entries
        get, touch = entries.get, entries.move_to_end
        with self._lock:
            for key in keys:
                value = get(key)
                if value is not None:
                    touch(key)
                    found[key] = value
        self._counters.add("hits", len(found))
        self._counters.add("misses", len(keys) - len(found))
        return found

    def get_all(self, keys: Sequence[CacheKey]) -> list[bytes] | None:
        """Every key's value in the keys' order, or None when one is absent (then nothing is touched
        or counted): the broker's warm path reads all of a query's segments or steps aside, and a
        list costs no dict built and read back, a hash of each key fewer twice over. A repeated
        read of the same key list between two writes costs a dictionary lookup (_EvictingLRU)."""
        if len(keys) < 2:
            return self._get_one(keys)
        with self._lock:
            values = self._lru.read_all(keys)
        if values is None:
            return None
        self._counters.add("hits", len(keys))
        return list(values)

    def _get_one(self, keys: Sequence[CacheKey]) -> list[bytes] | None:
        """get_all of no key or one (itemgetter takes at least one and returns one bare)."""
        if not keys:
            return []
        entries = self._lru.entries
        with self._lock:
            value = entries.get(keys[0])
            if value is None:
                return None
            self._lru.touch(keys[0])
        self._counters.add("hits", 1)
        return [value]

    async def aget_all(self, keys: Sequence[CacheKey]) -> list[bytes] | None:
        return self.get_all(keys)

    def peek_many(self, keys: Sequence[CacheKey]) -> dict[CacheKey, bytes]:
        """The values of the keys present, nothing touched or counted (the hybrid cache's warm
        read counts once it knows L2 holds the rest)."""
        get = self._lru.entries.get
        with self._lock:
            found = [(key, get(key)) for key in keys]
        return {key: value for key, value in found if value is not None}

    def put_many(self, items: Mapping[CacheKey, bytes]) -> None:
        skipped = 0
        with self._lock:
            for key, value in items.items():
                size = charged_size(key, value)
                if size > self.max_entry_size:
                    skipped += 1
                    continue
                self._lru.put(key, bytes(value), size)
                self._by_namespace[key.namespace].add(key)
        self._counters.add("put_skipped_too_large", skipped)

    def close_namespace(self, namespace: str) -> None:
        with self._lock:
            for key in self._by_namespace.pop(namespace, ()):
                self._lru.pop(key)

    def stats(self) -> CacheStats:
        with self._lock:
            entries, size = len(self._lru), int(self._lru.currsize)
        return self._counters.snapshot(entries=entries, size_bytes=size)

    def close(self) -> None:
        with self._lock:
            self._lru.clear()
            self._by_namespace.clear()
        super().close()
