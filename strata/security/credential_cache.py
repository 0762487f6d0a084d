"""Verified credentials, remembered so the warm path costs no PBKDF2 run and no parsing.

Druid caches the hashes it computed per (password, salt, iterations). Here the key is a keyed
BLAKE2b digest of the whole `Authorization` header (the key made at start), so the cache never
holds a password, and an entry is only trusted while the user's stored credentials are the very
record it was verified against (a changed password or a deleted user misses at once).
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Mapping

from strata.security.passwords import Credentials

MAX_ENTRIES = 10_000


class VerifiedCredentials:
    def __init__(self, max_entries: int = MAX_ENTRIES) -> None:
        self._key = secrets.token_bytes(32)
        self._max = max_entries
        self._verified: dict[bytes, tuple[str, Credentials]] = {}

    def _digest(self, header: bytes) -> bytes:
        return hashlib.blake2b(header, key=self._key, digest_size=16).digest()

    def user(self, header: bytes, credentials: Mapping[str, Credentials | None]) -> str | None:
        """The user this exact header was verified for, if its record is still the current one."""
        hit = self._verified.get(self._digest(header))
        if hit is not None and credentials.get(hit[0]) is hit[1]:
            return hit[0]
        return None

    def remember(self, header: bytes, user: str, stored: Credentials) -> None:
        if len(self._verified) >= self._max:  # a flood of distinct headers: start again, stay bounded
            self._verified.clear()
        self._verified[self._digest(header)] = (user, stored)
