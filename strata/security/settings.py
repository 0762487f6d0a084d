"""Security settings of a node: flags for what may sit on a command line, config file or
environment for the secrets (a password on a command line shows in every process listing)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from strata.security.model import INTERNAL_USER

ADMIN_PASSWORD_ENV = "STRATA_ADMIN_PASSWORD"
INTERNAL_PASSWORD_ENV = "STRATA_INTERNAL_PASSWORD"
DEFAULT_UNSECURED = "/status/health"
LOOPBACK = ("127.0.0.1", "::1", "localhost")


class SecurityConfigError(ValueError):
    """Settings a node must not start with."""


@dataclass(frozen=True)
class SecuritySettings:
    authenticator: str | None  # None: security off
    authorizer: str
    metadata: str | None
    unsecured_paths: frozenset[str]
    internal_user: str = INTERNAL_USER
    internal_password: str | None = None
    admin_password: str | None = None
    poll_seconds: float = 1.0
    max_failed_logins: int = 10
    failed_login_window_s: float = 60.0
    tls_cert: str | None = None
    tls_key: str | None = None
    tls_ca: str | None = None  # the CA other nodes' certificates must chain to (node-to-node calls)

    @property
    def tls(self) -> tuple[str, str] | None:
        """(certificate, key) when this node serves HTTPS."""
        return (self.tls_cert, self.tls_key) if self.tls_cert and self.tls_key else None

    @property
    def enabled(self) -> bool:
        return self.authenticator is not None

    def __repr__(self) -> str:  # never the passwords, whatever prints this
        return f"SecuritySettings(authenticator={self.authenticator!r}, metadata={self.metadata!r})"


def add_security_flags(parser: argparse.ArgumentParser, *, metadata: bool = False) -> None:
    group = parser.add_argument_group("security (Druid's basic-security model; see docs/security.md)")
    group.add_argument(
        "--authenticator",
        default=None,
        help="name of the Basic authenticator (Druid's 'basic'); unset: no authentication, loopback only",
    )
    group.add_argument("--authorizer", default="basic", help="name of the authorizer (default basic)")
    group.add_argument(
        "--unsecured-paths",
        default=DEFAULT_UNSECURED,
        help=f"comma-separated paths answered without credentials (default {DEFAULT_UNSECURED})",
    )
    group.add_argument(
        "--insecure",
        action="store_true",
        help="bind a non-loopback address with no authenticator (anyone reaching it may do anything)",
    )
    group.add_argument(
        "--auth-poll-seconds", type=float, default=1.0, help="how often users and roles are re-read"
    )
    group.add_argument(
        "--max-failed-logins",
        type=int,
        default=10,
        help="failed logins per client address per minute before it is refused with 429 (default 10)",
    )
    group.add_argument("--tls-cert", help="serve HTTPS with this certificate (PEM; with --tls-key)")
    group.add_argument("--tls-key", help="the private key of --tls-cert (PEM)")
    group.add_argument(
        "--tls-ca", help="CA certificate (PEM) other nodes' certificates must chain to: calls them over HTTPS"
    )
    if metadata:
        group.add_argument(
            "--metadata",
            default=None,
            help="metadata store (file, sqlite:///path or postgresql://...) holding users and roles",
        )


def _secret(
    name: str, env: str, config: Mapping[str, Any], section: str, environ: Mapping[str, str]
) -> str | None:
    for table in (config.get("security"), config.get(section), config):
        if isinstance(table, Mapping):
            for key in (name, name.replace("-", "_")):
                value = table.get(key)
                if isinstance(value, str) and value:
                    return value
    value = environ.get(env)
    return value or None


def security_settings(
    args: argparse.Namespace, section: str, environ: Mapping[str, str] | None = None
) -> SecuritySettings:
    """Settings from parsed flags; passwords from the config file (`args._config`, set by
    `strata.cli`) or the environment."""
    environ = os.environ if environ is None else environ
    config: Mapping[str, Any] = getattr(args, "_config", None) or {}
    paths = frozenset(p.strip() for p in str(args.unsecured_paths or "").split(",") if p.strip())
    settings = SecuritySettings(
        authenticator=args.authenticator or None,
        authorizer=args.authorizer,
        metadata=getattr(args, "metadata", None),
        unsecured_paths=paths,
        internal_password=_secret("internal-password", INTERNAL_PASSWORD_ENV, config, section, environ),
        admin_password=_secret("admin-password", ADMIN_PASSWORD_ENV, config, section, environ),
        poll_seconds=max(0.1, args.auth_poll_seconds),
        max_failed_logins=max(1, args.max_failed_logins),
        tls_cert=args.tls_cert or None,
        tls_key=args.tls_key or None,
        tls_ca=args.tls_ca or None,
    )
    if bool(settings.tls_cert) != bool(settings.tls_key):
        raise SecurityConfigError("--tls-cert and --tls-key go together")
    for flag, path in (
        ("--tls-cert", settings.tls_cert),
        ("--tls-key", settings.tls_key),
        ("--tls-ca", settings.tls_ca),
    ):
        if path is not None and not os.path.isfile(path):
            raise SecurityConfigError(f"{flag} {path}: no such file")
    check_bind(settings, getattr(args, "bind", None) or args.host, args.insecure)
    if settings.enabled and not settings.metadata:
        raise SecurityConfigError("--authenticator needs --metadata (the store holding users and roles)")
    return settings


def check_bind(settings: SecuritySettings, host: str, insecure: bool) -> None:
    """Secure by default: no authenticator means loopback only, unless `--insecure` says otherwise."""
    if not settings.enabled and host not in LOOPBACK and not insecure:
        raise SecurityConfigError(
            f"refusing to bind {host} with no authenticator: anyone reaching it could read and write "
            "every datasource. Configure --authenticator basic (docs/security.md) or pass --insecure"
        )
