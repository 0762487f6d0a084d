"""A node's security at run time: who is asking (Basic credentials against the store's snapshot)
and what they may do, with the snapshot refreshed from the store every `poll_seconds`."""

from __future__ import annotations

import argparse
import asyncio
import base64
import binascii
import contextlib
import logging
from dataclasses import dataclass

from strata.security.credential_cache import VerifiedCredentials
from strata.security.model import EMPTY, AuthSnapshot
from strata.security.passwords import hash_password, verify_password
from strata.security.rate_limit import FailedLogins
from strata.security.resources import Action, Resource
from strata.security.settings import SecuritySettings
from strata.security.store import SecurityStore, open_security_store

log = logging.getLogger("strata.security")

# an unknown user costs the same PBKDF2 run as a known one: the answer's timing names no user
_DECOY = hash_password("decoy password, never matched")


@dataclass(frozen=True, slots=True)
class BasicCredentials:
    user: str
    password: str

    def __repr__(self) -> str:
        return f"BasicCredentials(user={self.user!r})"


def parse_basic(header: str | None) -> BasicCredentials | None:
    """`Authorization: Basic b64(user:password)`; None when absent or not Basic."""
    if not header:
        return None
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "basic" or not token:
        return None
    try:
        decoded = base64.b64decode(token.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None
    user, sep, password = decoded.partition(":")
    return BasicCredentials(user, password) if sep and user else None


class Guard:
    def __init__(self, settings: SecuritySettings, store: SecurityStore) -> None:
        self.settings = settings
        self.store = store
        self.snapshot: AuthSnapshot = EMPTY
        self.verified = VerifiedCredentials()
        self.failed_logins = FailedLogins(settings.max_failed_logins, settings.failed_login_window_s)
        self._poller: asyncio.Task[None] | None = None

    @classmethod
    def open(cls, settings: SecuritySettings) -> Guard:
        """Open the store, create the initial users once, read the first snapshot (at start-up,
        before serving: blocking is fine here)."""
        assert settings.metadata is not None
        store = open_security_store(settings.metadata)
        store.ensure_initial(settings.admin_password, settings.internal_password)
        guard = cls(settings, store)
        guard.snapshot = store.snapshot()
        return guard

    # -- identity --------------------------------------------------------------------------------
    def known(self, header: bytes) -> str | None:
        """The user of an `Authorization` header verified before (the warm path: one digest and
        one dict lookup), else None."""
        return self.verified.user(header, self.snapshot.credentials)

    async def authenticate(self, header: bytes) -> str | None:
        """The user the header's Basic credentials prove, else None; a PBKDF2 run off the loop."""
        creds = parse_basic(header.decode("latin-1"))
        if creds is None:
            return None
        stored = self.snapshot.credentials.get(creds.user)
        ok = await asyncio.to_thread(verify_password, creds.password, stored or _DECOY)
        if ok and stored is not None:
            self.verified.remember(header, creds.user, stored)
            return creds.user
        return None

    def is_internal(self, user: str) -> bool:
        return user == self.settings.internal_user

    def allows(self, user: str, resource: Resource, action: Action) -> bool:
        return self.snapshot.allows(user, resource, action)

    def readable(self, user: str, names: list[str]) -> list[str]:
        return self.snapshot.readable(user, names)

    # -- keeping up with the store ---------------------------------------------------------------
    def ensure_polling(self) -> None:
        """Started by the first request (the middleware has no lifespan of its own)."""
        if self._poller is None:
            self._poller = asyncio.get_running_loop().create_task(self._poll(), name="security-poll")

    async def _poll(self) -> None:
        while True:
            await asyncio.sleep(self.settings.poll_seconds)
            try:
                await self.refresh()
            except Exception as e:  # the store is away: keep the last snapshot, say so, try again
                log.warning("cannot re-read users and roles: %s", type(e).__name__)

    async def refresh(self) -> None:
        version = await asyncio.to_thread(self.store.version)
        if version != self.snapshot.version:
            self.snapshot = await asyncio.to_thread(self.store.snapshot)

    async def close(self) -> None:
        if self._poller is not None:
            self._poller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._poller
        await asyncio.to_thread(self.store.close)


class SecurityStartError(RuntimeError):
    """A node must not start with these security settings (the message says why)."""


def start_security(args: argparse.Namespace, section: str) -> tuple[SecuritySettings, Guard | None]:
    """A node's settings and, when an authenticator is configured, its guard; refuses to start
    (SecurityStartError) on an open non-loopback bind or an unreadable store."""
    from strata.security.settings import SecurityConfigError, security_settings
    from strata.security.store import SecurityStoreError

    try:
        settings = security_settings(args, section)
        return settings, Guard.open(settings) if settings.enabled else None
    except (SecurityConfigError, SecurityStoreError) as e:
        raise SecurityStartError(str(e)) from None
