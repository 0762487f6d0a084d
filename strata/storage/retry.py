"""Bounded retries with exponential backoff around whole deep-storage operations.

pyarrow's S3 client already retries single requests (throttling, 5xx, connection errors); this
repeats a whole upload or download when one still fails part-way, e.g. a connection reset in the
middle of a body or a server restarting for longer than the client's own retries last. Errors
that another attempt cannot fix (a missing object or bucket, denied access) end at once.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")

PERMANENT_MARKERS = (
    "ACCESS_DENIED", "AccessDenied", "NO_SUCH_BUCKET", "NoSuchBucket", "INVALID_ACCESS_KEY_ID",
    "InvalidAccessKeyId", "SIGNATURE_DOES_NOT_MATCH", "SignatureDoesNotMatch", "Path does not exist",
    "NoSuchKey", "NO_SUCH_KEY", "RESOURCE_NOT_FOUND",
)  # fmt: skip
"""Parts of pyarrow's S3 error messages that say retrying is pointless."""


@dataclass(frozen=True)
class Backoff:
    """`attempts` tries in all; waits of `first_s`, doubling up to `max_s`, with +-25% jitter."""

    attempts: int = 4
    first_s: float = 0.25
    max_s: float = 4.0

    def delay(self, attempt: int) -> float:
        """The wait after failed attempt number `attempt` (1-based)."""
        base = min(self.first_s * 2 ** (attempt - 1), self.max_s)
        return float(base * random.uniform(0.75, 1.25))


def is_transient(error: BaseException) -> bool:
    """Whether another attempt may succeed: I/O errors other than not-found / denied."""
    if isinstance(error, (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError)):
        return False
    if not isinstance(error, OSError):
        return False
    text = str(error)
    return not any(marker in text for marker in PERMANENT_MARKERS)


def retrying(
    operation: Callable[[], T],
    what: str,
    backoff: Backoff,
    transient: Callable[[BaseException], bool] = is_transient,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """`operation()`, repeated on transient errors up to `backoff.attempts` times; the last error
    propagates."""
    attempt = 1
    while True:
        try:
            return operation()
        except Exception as e:
            if attempt >= backoff.attempts or not transient(e):
                raise
            wait = backoff.delay(attempt)
            log.warning("%s failed (attempt %d of %d, again in %.2fs): %s",
                        what, attempt, backoff.attempts, wait, e)  # fmt: skip
            sleep(wait)
            attempt += 1
