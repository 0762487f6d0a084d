"""What a Strata process sends when it calls another node: the internal identity (Druid's
escalator) as a Basic `Authorization` header, or nothing with security off."""

from __future__ import annotations

import base64

from strata.security.settings import SecuritySettings


def basic_header(user: str, password: str) -> dict[str, str]:
    token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
    return {"Authorization": f"Basic {token}"}


def node_scheme(settings: SecuritySettings) -> str:
    """How this node calls the others: https when it was given the cluster's CA (--tls-ca)."""
    return "https" if settings.tls_ca else "http"


def internal_headers(settings: SecuritySettings) -> dict[str, str]:
    if not settings.enabled or settings.internal_password is None:
        return {}
    return basic_header(settings.internal_user, settings.internal_password)
