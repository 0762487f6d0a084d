"""Failed logins per client address: past `max_failures` in `window_s`, the address is refused
(429 with Retry-After) until its oldest failure leaves the window, right password or not, so a
guesser learns nothing from the answers while it is limited."""

from __future__ import annotations

import math
import time
from collections import OrderedDict, deque
from collections.abc import Callable

MAX_FAILURES = 10
WINDOW_S = 60.0
MAX_ADDRESSES = 10_000  # tracked at once; the longest quiet one is forgotten first


class FailedLogins:
    def __init__(
        self,
        max_failures: int = MAX_FAILURES,
        window_s: float = WINDOW_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_failures = max_failures
        self.window_s = window_s
        self._clock = clock
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()

    def _recent(self, address: str, now: float) -> deque[float] | None:
        seen = self._failures.get(address)
        if seen is None:
            return None
        while seen and seen[0] <= now - self.window_s:
            seen.popleft()
        if not seen:
            del self._failures[address]
            return None
        return seen

    def tracked(self, address: str) -> bool:
        """Whether the address failed lately (the warm path asks nothing more of a clean one)."""
        return address in self._failures

    def retry_after(self, address: str) -> int | None:
        """Seconds the address must wait, or None when it may try."""
        if address not in self._failures:  # the common case, answered without the clock
            return None
        now = self._clock()
        seen = self._recent(address, now)
        if seen is None or len(seen) < self.max_failures:
            return None
        return max(1, math.ceil(seen[0] + self.window_s - now))

    def failed(self, address: str) -> None:
        now = self._clock()
        seen = self._recent(address, now)
        if seen is None:
            seen = self._failures[address] = deque(maxlen=self.max_failures)
            while len(self._failures) > MAX_ADDRESSES:
                self._failures.popitem(last=False)
        else:
            self._failures.move_to_end(address)
        seen.append(now)
