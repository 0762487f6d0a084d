"""One default TLS context for every httpx client of a process (tests and benchmarks).

httpx builds an `ssl.SSLContext` for each client, loading certifi's bundle of authorities: about
30 ms of CPU, where a request to a loopback server takes 2-3 ms. A one-off `httpx.get` builds a
client, so a test's poll (`httpx.get(...)` every 0.1-0.3 s while a node starts or a segment
loads) spent most of its CPU there, beside the servers it waits for. Clients that ask for the
default verification (`verify=True`, no client certificate) share one context here; any other
setting (a CA file, `verify=False`, a context of the caller's) is built as httpx builds it.
"""

from __future__ import annotations

import ssl
import threading
from typing import Any

import httpx._transports.default as _transports
from httpx._config import create_ssl_context as _built

_shared: dict[bool, ssl.SSLContext] = {}  # trust_env -> the default context
_lock = threading.Lock()


def _create_ssl_context(verify: Any = True, cert: Any = None, trust_env: bool = True) -> ssl.SSLContext:
    if verify is not True or cert is not None:
        return _built(verify=verify, cert=cert, trust_env=trust_env)
    with _lock:
        if trust_env not in _shared:
            _shared[trust_env] = _built(verify=True, cert=None, trust_env=trust_env)
        return _shared[trust_env]


def share_default_tls_context() -> None:
    """From now on, httpx clients with the default verification share one context."""
    # where httpx's transports look it up when a client is built
    _transports.create_ssl_context = _create_ssl_context  # type: ignore[attr-defined]
