"""The coordinator's duty loop, the seam retention rules and auto-compaction plug into: each duty runs
at its period in a worker thread, and a failing one never stops the others."""

from __future__ import annotations

import asyncio
import threading

import pytest

from strata.coordinator.duties import Duty, DutyLoop


def test_duties_run_at_their_periods_and_a_failing_one_stops_no_other() -> None:
    seen: list[tuple[str, object, str]] = []

    def note(owner: object) -> None:
        seen.append(("note", owner, threading.current_thread().name))

    def broken(owner: object) -> None:
        raise RuntimeError("the store is away")

    async def run() -> DutyLoop:
        loop = DutyLoop(owner="the coordinator")
        loop.add(Duty("note", 0.05, note))
        loop.add(Duty("broken", 0.05, broken))
        await loop.start()
        await asyncio.sleep(0.5)
        await loop.stop()
        return loop

    loop = asyncio.run(run())
    by_name = {d["name"]: d for d in loop.status()}
    assert by_name["note"]["runs"] >= 3 and by_name["note"]["failures"] == 0
    assert by_name["broken"]["runs"] >= 3 and by_name["broken"]["failures"] == by_name["broken"]["runs"]
    assert by_name["broken"]["lastError"] == "RuntimeError: the store is away"
    assert all(owner == "the coordinator" for _, owner, _ in seen)
    assert all(name != threading.main_thread().name for _, _, name in seen)  # off the event loop
    with pytest.raises(ValueError, match="runs already"):
        loop.add(Duty("note", 1.0, note))
