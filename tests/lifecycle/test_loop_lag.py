"""The event loop's lateness, measured by the server itself (strata.server.loop_lag)."""

from __future__ import annotations

import asyncio
import time

from strata.server.loop_lag import LoopLag


def test_a_callback_that_holds_the_loop_shows_as_lag_and_stop_ends_the_samples() -> None:
    async def main() -> tuple[list[float], int]:
        seen: list[float] = []
        lag = LoopLag(seen.append, period_s=0.01)
        lag.start()
        await asyncio.sleep(0.05)
        time.sleep(0.2)  # noqa: ASYNC251 - a callback holding the loop is the point
        await asyncio.sleep(0.05)
        await lag.stop()
        stopped = len(seen)
        await asyncio.sleep(0.05)
        return seen, stopped

    seen, stopped = asyncio.run(asyncio.wait_for(main(), timeout=10))
    assert len(seen) == stopped >= 3
    assert max(seen) >= 0.15 and min(seen) < 0.15  # the held loop's wait, and timely samples beside it
