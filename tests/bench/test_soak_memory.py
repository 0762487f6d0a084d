"""bench.soak's memory figures: each minute's lowest broker RSS, the process gone or not sampled."""

from __future__ import annotations

from bench.soak import broker_troughs
from harness.memory import MemorySample, MemoryWatchdog

MB = 1_048_576


def test_each_minutes_lowest_broker_rss() -> None:
    watchdog = MemoryWatchdog({})
    watchdog.samples += [
        MemorySample(1.0, {"broker": 500 * MB, "historical0": 9 * MB}),
        MemorySample(30.0, {"broker": 300 * MB}),
        MemorySample(59.0, {"broker": 700 * MB}),
        MemorySample(61.0, {"historical0": 1 * MB}),  # the broker not read this time
        MemorySample(125.0, {"broker": 420 * MB}),
    ]
    assert broker_troughs(watchdog) == {0: 300, 2: 420}
