"""How late a server's event loop runs what is due: the wait every request pays for the loop's
other work (a callback that holds it, a burst of requests answered one after another).

A task asks to wake every `period_s` and records by how much it woke late; the server keeps the
figures in a histogram (the broker's `strata_broker_event_loop_lag_seconds`). A cheap query makes
several trips through the loop (its request read, its fetches' answers, its response written), each
of which waits about this long: when cheap queries slow down beside heavy ones, this tells whether
the loop is where they wait.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from strata.server.background import Background

PERIOD_S = 0.05
# seconds: from the timer's own jitter (well under a millisecond) to a loop held for seconds
BUCKETS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class LoopLag(Background):
    """Feeds `observe` with the loop's lateness in seconds, once per `period_s` while started."""

    def __init__(self, observe: Callable[[float], None], period_s: float = PERIOD_S) -> None:
        super().__init__(self._run, "loop-lag")
        self.observe = observe
        self.period_s = period_s

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            due = loop.time() + self.period_s
            await asyncio.sleep(self.period_s)
            self.observe(max(0.0, loop.time() - due))
