"""Verified (user, password) pairs, remembered so the warm path costs no PBKDF2 run.

Druid caches the hashes it computed per (password, salt, iterations); here the key is an HMAC of
user and password under a key made at start, so the cache never holds a password, and an entry
is only trusted while the user's stored credentials are the very ones it was verified against.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

from cachetools import LRUCache

from security.passwords import Credentials

MAX_ENTRIES = 10_000


class VerifiedCredentials:
    def __init__(self, max_entries: int = MAX_ENTRIES) -> None:
        self._key = secrets.token_bytes(32)
        self._verified: LRUCache[bytes, Credentials] = LRUCache(max_entries)

    def _digest(self, user: str, password: str) -> bytes:
        return hmac.new(self._key, f"{user}\0{password}".encode(), hashlib.sha256).digest()

    def known(self, user: str, password: str, stored: Credentials) -> bool:
        return self._verified.get(self._digest(user, password)) is stored

    def remember(self, user: str, password: str, stored: Credentials) -> None:
        self._verified[self._digest(user, password)] = stored
