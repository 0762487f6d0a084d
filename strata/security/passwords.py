"""Salted PBKDF2-HMAC-SHA512 password hashes, as Druid's basic authenticator stores them.

Never plain, never reversible: a stored credential is (salt, iterations, hash). Druid's default
iteration count is 10,000; a store may raise it per user, and verification reads it from the record.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass

ITERATIONS = 10_000  # Druid's BasicAuthUtils.DEFAULT_KEY_ITERATIONS; never fewer
SALT_BYTES = 32
KEY_BYTES = 64  # 512 bits, as Druid's KEY_LENGTH
MIN_PASSWORD_CHARS = 1
MAX_PASSWORD_CHARS = 1024  # a longer "password" is a denial of service on the hash, not a secret


class PasswordRefused(ValueError):
    """A password that may not be set (empty or too long)."""


@dataclass(frozen=True, slots=True)
class Credentials:
    salt: bytes
    hash: bytes
    iterations: int


def _derive(password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac("sha512", password.encode("utf-8"), salt, iterations, KEY_BYTES)


def check_password_rules(password: str) -> None:
    if not MIN_PASSWORD_CHARS <= len(password) <= MAX_PASSWORD_CHARS:
        raise PasswordRefused(f"a password has {MIN_PASSWORD_CHARS} to {MAX_PASSWORD_CHARS} characters")


def hash_password(password: str, iterations: int = ITERATIONS) -> Credentials:
    check_password_rules(password)
    iterations = max(iterations, ITERATIONS)
    salt = secrets.token_bytes(SALT_BYTES)
    return Credentials(salt, _derive(password, salt, iterations), iterations)


def verify_password(password: str, stored: Credentials) -> bool:
    """Constant-time comparison; costs one PBKDF2 run (milliseconds: call it off the event loop)."""
    if len(password) > MAX_PASSWORD_CHARS:
        return False
    return hmac.compare_digest(_derive(password, stored.salt, stored.iterations), stored.hash)


def generate_password() -> str:
    """A fresh random password (the quickstart's admin password): 24 URL-safe characters."""
    return secrets.token_urlsafe(18)
