import asyncio

import pytest

from cache import SingleFlight

pytestmark = pytest.mark.timeout(30)


def test_fifty_concurrent_callers_share_one_fetch():
    calls = 0

    async def fetch():
        nonlocal calls
        calls += 1
        await asyncio.sleep(0.05)
        return {"segment": "s1", "rows": 42}

    async def run():
        flight: SingleFlight[str, dict] = SingleFlight()
        results = await asyncio.gather(*(flight.do("s1", fetch) for _ in range(50)))
        return flight, results

    flight, results = asyncio.run(run())
    assert calls == 1
    assert all(r is results[0] for r in results)
    assert results[0] == {"segment": "s1", "rows": 42}
    assert len(flight) == 0  # forgotten once done


def test_different_keys_fetch_separately():
    calls: list[str] = []

    def fetch_for(key):
        async def fetch():
            calls.append(key)
            await asyncio.sleep(0.01)
            return key.upper()

        return fetch

    async def run():
        flight: SingleFlight[str, str] = SingleFlight()
        keys = ["a", "b", "a", "c", "b"] * 10
        return await asyncio.gather(*(flight.do(x, fetch_for(x)) for x in keys)), keys

    results, keys = asyncio.run(run())
    assert results == [x.upper() for x in keys]
    assert sorted(calls) == ["a", "b", "c"]


def test_exception_reaches_every_waiter():
    calls = 0

    async def fail():
        nonlocal calls
        calls += 1
        await asyncio.sleep(0.01)
        raise RuntimeError("historical down")

    async def run():
        flight: SingleFlight[str, int] = SingleFlight()
        return await asyncio.gather(*(flight.do("s", fail) for _ in range(20)), return_exceptions=True)

    results = asyncio.run(run())
    assert calls == 1
    assert len(results) == 20
    assert all(isinstance(r, RuntimeError) and str(r) == "historical down" for r in results)


def test_cancelling_one_waiter_leaves_the_fetch_for_the_others():
    started, finished = 0, 0
    release: asyncio.Event | None = None

    async def fetch():
        nonlocal started, finished
        started += 1
        assert release is not None
        await release.wait()
        finished += 1
        return "result"

    async def run():
        nonlocal release
        release = asyncio.Event()
        flight: SingleFlight[str, str] = SingleFlight()
        waiters = [asyncio.create_task(flight.do("s", fetch)) for _ in range(5)]
        await asyncio.sleep(0.01)
        waiters[0].cancel()
        await asyncio.sleep(0.01)
        release.set()
        return await asyncio.gather(*waiters, return_exceptions=True)

    results = asyncio.run(run())
    assert isinstance(results[0], asyncio.CancelledError)
    assert results[1:] == ["result"] * 4
    assert (started, finished) == (1, 1)


def test_fetch_is_cancelled_when_every_waiter_left():
    fetch_cancelled = False

    async def fetch():
        nonlocal fetch_cancelled
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            fetch_cancelled = True
            raise
        return "never"

    async def run():
        flight: SingleFlight[str, str] = SingleFlight()
        waiters = [asyncio.create_task(flight.do("s", fetch)) for _ in range(3)]
        await asyncio.sleep(0.01)
        for w in waiters:
            w.cancel()
        await asyncio.gather(*waiters, return_exceptions=True)
        await asyncio.sleep(0)  # let the fetch task see its cancellation
        await asyncio.sleep(0)
        return flight

    flight = asyncio.run(run())
    assert fetch_cancelled
    assert len(flight) == 0


def test_a_finished_key_is_fetched_again():
    calls = 0

    async def fetch():
        nonlocal calls
        calls += 1
        return calls

    async def run():
        flight: SingleFlight[str, int] = SingleFlight()
        first = await flight.do("s", fetch)
        second = await flight.do("s", fetch)
        return first, second

    assert asyncio.run(run()) == (1, 2)
