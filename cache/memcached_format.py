"""Druid's memcached key and value layout (MemcachedCache.java), pure functions.

Key: `prefix:sha1hex(namespace):sha1hex(key)` — always short ASCII without spaces, so any segment
id and any query key fit memcached's 250-byte key rule. Because the key is a hash, the stored value
repeats the full named key in front, `[int32 len(named)][named][value]` with
`named = [int32 len(ns)][ns utf8][key]`, and a reader checks it: a hash collision, or another
writer's entry under the same name, then reads as a miss instead of someone else's result.
"""

from __future__ import annotations

import hashlib
import struct

from cache.base import CacheKey

MAX_KEY_LENGTH = 250
_HASHED_PART_LENGTH = 2 * (1 + 40)  # ":" + 40 hex digits, twice
_INT32 = struct.Struct(">i")


def validate_prefix(prefix: str) -> str:
    if not prefix or not prefix.isascii() or not prefix.isprintable() or " " in prefix:
        raise ValueError(f"memcached prefix must be non-empty printable ASCII without spaces, got {prefix!r}")
    if len(prefix) + _HASHED_PART_LENGTH > MAX_KEY_LENGTH:
        raise ValueError(f"memcached prefix too long ({len(prefix)} chars)")
    return prefix


def memcached_key(prefix: str, key: CacheKey) -> str:
    namespace_hash = hashlib.sha1(key.namespace.encode()).hexdigest()
    return f"{prefix}:{namespace_hash}:{hashlib.sha1(key.key).hexdigest()}"


def named_key_bytes(key: CacheKey) -> bytes:
    namespace = key.namespace.encode()
    return _INT32.pack(len(namespace)) + namespace + key.key


def frame(key: CacheKey, value: bytes) -> bytes:
    named = named_key_bytes(key)
    return b"".join((_INT32.pack(len(named)), named, value))


def unframe(key: CacheKey, stored: bytes) -> bytes | None:
    """The value if `stored` was framed for exactly `key`; None for anything else (collision, junk)."""
    if len(stored) < _INT32.size:
        return None
    (named_length,) = _INT32.unpack_from(stored)
    start = _INT32.size
    end = start + named_length
    if named_length < 0 or end > len(stored):
        return None
    if stored[start:end] != named_key_bytes(key):
        return None
    return stored[end:]
