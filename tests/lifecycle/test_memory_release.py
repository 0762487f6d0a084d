"""Free memory handed back while a server runs (strata.server.memory_release)."""

from __future__ import annotations

import asyncio
import threading

from strata.server.memory_release import MemoryRelease, release_free_memory
from strata.server.memory_trace import resident_bytes

MiB = 1 << 20


def _fragment(megabytes: int) -> list[bytes]:
    """`megabytes` of 1 KB objects (glibc's malloc, not Python's small-object pools) allocated in a
    thread of its own (its own arena), every 64th kept: the rest is free but cannot shrink the heap."""
    kept: list[bytes] = []

    def work() -> None:
        blocks = [bytes(1000) + bytes([i % 251]) for i in range(megabytes * 1024)]
        kept.extend(blocks[::64])

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    return kept


def test_free_pages_of_a_fragmented_heap_go_back() -> None:
    kept = _fragment(96)
    held = resident_bytes()
    release_free_memory()
    after = resident_bytes()
    assert held - after > 48 * MiB, (held >> 20, after >> 20)
    assert len(kept) == 96 * 1024 // 64


def test_a_release_only_once_grown_past_the_threshold() -> None:
    sizes = iter([100, 100, 150, 250, 130, 200, 235, 240])
    released: list[int] = []
    release = MemoryRelease(threshold=100, resident=lambda: next(sizes), release=lambda: released.append(1))
    assert not release.check()  # 100: as it started
    assert not release.check()  # 150: grown by 50
    assert release.check()  # 250: grown by 150, released down to 130
    assert not release.check()  # 200
    assert release.check()  # 235 - 130 >= 100
    assert released == [1, 1] and release.releases == 2


def test_runs_every_period_until_stopped() -> None:
    async def main() -> int:
        grown = iter(range(0, 10_000, 200))
        calls: list[int] = []
        release = MemoryRelease(period_s=0.01, threshold=100, resident=lambda: next(grown),
                                release=lambda: calls.append(1))  # fmt: skip
        release.start()
        await asyncio.sleep(0.2)
        await release.stop()
        done = len(calls)
        await asyncio.sleep(0.05)
        assert len(calls) == done
        return done

    assert asyncio.run(main()) >= 2


def test_a_release_due_waits_for_a_quiet_moment_but_at_most_a_period() -> None:
    async def main(quiet_after: float) -> list[float]:
        loop = asyncio.get_running_loop()
        started = loop.time()
        grown = iter(range(0, 10_000_000, 200))
        at: list[float] = []
        release = MemoryRelease(period_s=0.2, threshold=100, resident=lambda: next(grown),
                                release=lambda: at.append(loop.time() - started),
                                quiet=lambda: loop.time() - started >= quiet_after)  # fmt: skip
        release.start()
        await asyncio.sleep(2.0)
        await release.stop()
        return at

    waited = asyncio.run(main(quiet_after=0.35))
    assert waited and waited[0] >= 0.35  # due from 0.2 on, released once quiet
    assert asyncio.run(main(quiet_after=60))  # never quiet: released all the same, a period late


def test_a_steady_process_reads_its_size_once_per_period() -> None:
    async def main() -> tuple[int, int]:
        reads: list[int] = []

        def resident() -> int:
            reads.append(1)
            return 1000

        release = MemoryRelease(period_s=0.01, threshold=100, resident=resident)
        reads.clear()  # the one read at construction
        loop = asyncio.get_running_loop()
        started = loop.time()
        release.start()
        await asyncio.sleep(0.3)
        await release.stop()
        periods = int((loop.time() - started) / 0.01)
        return len(reads), periods

    reads, periods = asyncio.run(main())
    assert 3 <= reads <= periods, (reads, periods)
