"""A kazoo client configured to ride out ZooKeeper outages.

kazoo's default reconnect backoff grows to 60 s, long enough to lose the session after a short
server restart; capping it near 1 s keeps sessions (and their ephemeral znodes) alive. Single
commands are retried on ConnectionLoss for a bounded time so a caller never hangs forever.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kazoo.client import KazooClient


# reconnect quickly: a broker or data node should not sit disconnected for long
_BACKOFF = {"delay": 0.1, "backoff": 2, "max_jitter": 0.2, "max_delay": 1.0}


def make_kazoo_client(
    hosts: str,
    *,
    session_timeout_s: float = 10.0,
    command_tries: int = 20,
    client_id: tuple[int, bytes] | None = None,
    **extra: Any,
) -> KazooClient:
    """A client, not started; `hosts` is `HOST:PORT,...` optionally followed by a chroot."""
    from kazoo.client import KazooClient

    if not hosts or not hosts.strip():
        raise ValueError("ZooKeeper hosts must be HOST:PORT[,HOST:PORT...]")
    return KazooClient(
        hosts=hosts.strip(),
        timeout=session_timeout_s,
        client_id=client_id,
        connection_retry={"max_tries": -1, **_BACKOFF},
        command_retry={"max_tries": command_tries, **_BACKOFF},
        **extra,
    )
