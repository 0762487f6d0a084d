"""Cache counters: bumped from the event loop and from I/O threads, read as one consistent snapshot.

The snapshot is what the broker publishes (Prometheus gauges/counters, `GET /status/cache`), so it
is a plain frozen value that can be added (the two levels of a hybrid cache) and turned into a dict.
"""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass, fields
from typing import Any

COUNTER_NAMES = (
    "hits",
    "misses",
    "evictions",
    "errors",
    "timeouts",
    "put_skipped_too_large",
    "collisions",
)


@dataclass(frozen=True)
class CacheStats:
    """One snapshot. `entries`/`bytes` are gauges (what is held now); the rest only grow."""

    hits: int = 0
    misses: int = 0
    evictions: int = 0
    entries: int = 0
    bytes: int = 0
    errors: int = 0
    timeouts: int = 0
    put_skipped_too_large: int = 0
    collisions: int = 0

    @property
    def lookups(self) -> int:
        return self.hits + self.misses

    @property
    def hit_rate(self) -> float:
        """Hits over lookups; 0.0 before the first lookup rather than a division error."""
        return self.hits / self.lookups if self.lookups else 0.0

    def __add__(self, other: CacheStats) -> CacheStats:
        if not isinstance(other, CacheStats):
            return NotImplemented
        return CacheStats(**{f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self)})

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "hit_rate": self.hit_rate}


class StatsCounter:
    """Thread-safe counters named as in `COUNTER_NAMES` (a wrapper may add corrections, e.g. -1 hit)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts = dict.fromkeys(COUNTER_NAMES, 0)

    def add(self, name: str, amount: int = 1) -> None:
        if name not in self._counts:
            raise KeyError(f"unknown cache counter {name!r}")
        if amount:
            with self._lock:
                self._counts[name] += amount

    def get(self, name: str) -> int:
        with self._lock:
            return self._counts[name]

    def snapshot(self, entries: int = 0, size_bytes: int = 0) -> CacheStats:
        with self._lock:
            counts = dict(self._counts)
        return CacheStats(entries=entries, bytes=size_bytes, **counts)
