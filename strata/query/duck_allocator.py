"""DuckDB's own allocator: the jemalloc linked into DuckDB's Python module (its symbols prefixed
`duckdb_je_`), whose pages neither glibc's statistics nor Arrow's pool count.

Without its background threads, jemalloc hands the pages of freed memory back to the system only
when the same arena allocates again: a statement that built a large hash table leaves its pages
resident after it ends, however long the engine then stays idle. `allocator_stats` reads what it
holds (for the memory trace, strata.server.memory_trace); `purge` gives back every unused page now.
"""

from __future__ import annotations

import ctypes
import functools
import importlib
from typing import Any

ALL_ARENAS = 4096  # jemalloc's MALLCTL_ARENAS_ALL


@functools.cache
def _mallctl() -> Any:
    """DuckDB's `mallctl`, or None (a build without jemalloc: other platforms)."""
    for name in ("_duckdb", "duckdb.duckdb"):
        try:
            path = importlib.import_module(name).__file__
            return getattr(ctypes.CDLL(path), "duckdb_je_mallctl", None) if path else None
        except (ImportError, OSError):
            continue
    return None


def allocator_stats() -> dict[str, int]:
    """Bytes DuckDB's allocator has `allocated` to live objects and keeps `resident`; empty
    without jemalloc."""
    mallctl = _mallctl()
    if mallctl is None:
        return {}
    epoch, size = ctypes.c_uint64(1), ctypes.c_size_t(8)
    mallctl(b"epoch", ctypes.byref(epoch), ctypes.byref(size), ctypes.byref(epoch), size)  # refresh
    out = {}
    for name in ("allocated", "resident"):
        value, size = ctypes.c_size_t(), ctypes.c_size_t(ctypes.sizeof(ctypes.c_size_t))
        if mallctl(f"stats.{name}".encode(), ctypes.byref(value), ctypes.byref(size), None, 0) == 0:
            out[name] = value.value
    return out


def purge() -> bool:
    """Give every page DuckDB's allocator holds unused back to the system; whether it could."""
    mallctl = _mallctl()
    return mallctl is not None and mallctl(f"arena.{ALL_ARENAS}.purge".encode(), None, None, None, 0) == 0
