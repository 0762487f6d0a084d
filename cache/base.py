"""The one interface every result-cache backend offers, and the key it is addressed by.

Keys and values are opaque bytes here: what a value means (a segment's partial result) and how a
key is derived from a query belong to the broker. The broker is asyncio, so each backend also has
`aget_many`/`aput_many`; a backend doing network I/O runs it on its own small thread pool so the
event loop never blocks, while an in-process backend answers inline.
"""

from __future__ import annotations

import asyncio
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Self, TypeVar

from cache.stats import CacheStats

T = TypeVar("T")


class CacheKey(tuple[str, bytes]):
    """Druid's NamedKey: namespace = segment id (the unit of invalidation), key = the rest.

    A tuple underneath, so hashing and comparing run in C: a warm query looks up every segment's
    key in several dicts, and a Python-level `__hash__` cost twice the lookups themselves (about a
    tenth of a 100-segment cached query's CPU). Immutable, as a dict key must be.
    """

    __slots__ = ()

    def __new__(cls, namespace: str, key: bytes) -> Self:
        if not isinstance(namespace, str):
            raise TypeError(f"CacheKey.namespace must be str, not {type(namespace).__name__}")
        if not isinstance(key, bytes):
            raise TypeError(f"CacheKey.key must be bytes, not {type(key).__name__}")
        return super().__new__(cls, (namespace, key))

    def __getnewargs__(self) -> tuple[str, bytes]:  # pickling calls __new__ with these
        return (self[0], self[1])

    @property
    def namespace(self) -> str:
        return self[0]

    @property
    def key(self) -> bytes:
        return self[1]

    def __repr__(self) -> str:
        return f"CacheKey(namespace={self[0]!r}, key={self[1]!r})"


class ResultCache(ABC):
    """A bulk get/put byte cache. Failures of the backing store read as misses, never raise."""

    #: True when get/put may wait on the network; the async wrappers then use the I/O pool.
    blocking: bool = False
    io_threads: int = 4

    _executor: ThreadPoolExecutor | None = None
    _executor_lock = threading.Lock()

    @abstractmethod
    def get_many(self, keys: Sequence[CacheKey]) -> dict[CacheKey, bytes]:
        """The cached values of those keys that are present; absent keys are simply missing."""

    @abstractmethod
    def put_many(self, items: Mapping[CacheKey, bytes]) -> None:
        """Store best-effort: entries that do not fit or cannot be written are dropped."""

    @abstractmethod
    def close_namespace(self, namespace: str) -> None:
        """Forget a segment's entries once it is gone (a no-op where the store cannot enumerate)."""

    @abstractmethod
    def stats(self) -> CacheStats: ...

    def available(self) -> bool:
        """False when the cache is known to be down (a circuit breaker): callers may skip it."""
        return True

    def breaker_status(self) -> dict[str, dict[str, Any]]:
        """Per remote server: {"state": "open"|"closed", "trips": n}; empty for local caches."""
        return {}

    def close(self) -> None:
        executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)

    async def aget_many(self, keys: Sequence[CacheKey]) -> dict[CacheKey, bytes]:
        if not self.blocking:
            return self.get_many(keys)
        return await self.run_blocking(self.get_many, list(keys))

    async def aget_all(self, keys: Sequence[CacheKey]) -> list[bytes] | None:
        """Every key's value in the keys' order, or None when one is absent, with nothing counted
        (the caller then runs its full lookup, which counts). The broker's per-segment warm path:
        all of a query's segments or none. A backend without such a read returns None."""
        return None

    async def aput_many(self, items: Mapping[CacheKey, bytes]) -> None:
        if not self.blocking:
            self.put_many(items)
            return
        await self.run_blocking(self.put_many, dict(items))

    async def run_blocking(self, fn: Callable[..., T], *args: object) -> T:
        """Run `fn(*args)` on this cache's I/O pool (not the loop's default one, which others share)."""
        return await asyncio.get_running_loop().run_in_executor(self._io_pool(), fn, *args)

    def _io_pool(self) -> ThreadPoolExecutor:
        if self._executor is None:
            with self._executor_lock:
                if self._executor is None:
                    self._executor = ThreadPoolExecutor(self.io_threads, thread_name_prefix="strata-cache")
        return self._executor

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
