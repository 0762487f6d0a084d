"""Where the metadata store lives, from `--metadata`: a SQLite path or a PostgreSQL URL.

A PostgreSQL password should come from libpq's own places (PGPASSWORD, ~/.pgpass, a service file)
or a config file; whatever the URL holds, only `redact(url)` is ever printed.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

POSTGRES_SCHEMES = ("postgresql://", "postgres://")

_SECRET_PARAM = re.compile(r"(?i)(password|passfile|sslpassword)=[^&\s]*")


def is_postgres(location: str) -> bool:
    return location.startswith(POSTGRES_SCHEMES)


def redact(location: str) -> str:
    """The location with any password replaced by `***` (URL user info and `password=` parameters)."""
    if "://" not in location:
        return location
    try:
        parts = urlsplit(location)
    except ValueError:
        return location.split("://", 1)[0] + "://***"
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, hostinfo = netloc.rpartition("@")
        user, colon, _ = userinfo.partition(":")
        netloc = f"{user}:***@{hostinfo}" if colon else f"{user}@{hostinfo}"
    query = _SECRET_PARAM.sub(lambda m: f"{m.group(1)}=***", parts.query)
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def scrub(message: str, location: str) -> str:
    """An error message with the location's password (if any) taken out, wherever it appears."""
    message = message.replace(location, redact(location))
    for secret in _secrets(location):
        message = message.replace(secret, "***")
    return message


def _secrets(location: str) -> list[str]:
    try:
        parts = urlsplit(location)
    except ValueError:
        return []
    found = [parts.password] if parts.password else []
    found += [m.group(0).split("=", 1)[1] for m in _SECRET_PARAM.finditer(parts.query)]
    return [s for s in found if s]
