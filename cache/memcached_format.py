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


def frame_header(key: CacheKey) -> bytes:
    """What a value stored for `key` starts with: `[int32 len(named)][named]`."""
    named = named_key_bytes(key)
    return _INT32.pack(len(named)) + named


def frame(key: CacheKey, value: bytes, header: bytes | None = None) -> bytes:
    return (header or frame_header(key)) + value


def unframe(key: CacheKey, stored: bytes, header: bytes | None = None) -> bytes | None:
    """The value if `stored` was framed for exactly `key` (`header`: its frame_header, if known);
    None for anything else (collision, junk)."""
    header = header or frame_header(key)
    if not stored.startswith(header):
        return None
    return stored[len(header) :]
