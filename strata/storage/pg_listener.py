"""A thread that LISTENs on a PostgreSQL channel and calls back on every notification.

Its own autocommit connection (a LISTEN lives in a session); TCP keepalives notice a server gone
without a word (a host cut off), and after any loss it reconnects with backoff and calls back once
more, since notifications sent while it was away are lost: the callback must re-read, not trust
the payload.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

import psycopg

from strata.storage.metadata_url import redact, scrub

log = logging.getLogger(__name__)

KEEPALIVES: dict[str, Any] = {
    "keepalives": 1,
    "keepalives_idle": 5,
    "keepalives_interval": 2,
    "keepalives_count": 3,
}


class Listener:
    def __init__(self, url: str, channel: str, on_change: Callable[[], None], *, wait_s: float = 0.5):
        self._url = url
        self._channel = channel
        self._on_change = on_change
        self._wait_s = wait_s
        self._stop = threading.Event()
        self.connected = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"listen-{channel}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        backoff = 0.2
        while not self._stop.is_set():
            try:
                with psycopg.connect(self._url, autocommit=True, connect_timeout=5, **KEEPALIVES) as conn:
                    conn.execute(f"LISTEN {self._channel}")
                    self.connected.set()
                    self._on_change()  # whatever changed while we were not listening
                    backoff = 0.2
                    while not self._stop.is_set():
                        if any(True for _ in conn.notifies(timeout=self._wait_s, stop_after=1)):
                            # a burst of commits wakes the reader once; it reads the change log
                            self._on_change()
            except psycopg.Error as e:
                self.connected.clear()
                if self._stop.is_set():
                    return
                log.warning(
                    "lost notifications from %s (%s); reconnecting in %.1fs",
                    redact(self._url),
                    scrub(str(e).strip(), self._url),
                    backoff,
                )
                self._stop.wait(backoff)
                backoff = min(backoff * 2, 5.0)
            except Exception:  # a failing callback must not end the thread
                log.exception("notification callback failed")
                self._stop.wait(backoff)

    def close(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self._thread.join(timeout)
