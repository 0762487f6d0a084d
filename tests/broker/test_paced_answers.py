"""A low-priority query's large answer goes out in pieces, each after the cheap lane (queries of
priority 0 and up) lets it (broker_service.paced_answers, Admission.cheap_lane_quiet): the bytes
are the same, only their order against cheap work changes. Other answers are sent whole."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from broker_service import paced_answers
from broker_service.admission import Admission
from broker_service.laning import hilo
from broker_service.paced_answers import paced_answer


async def _never_quiet(max_wait_s: float) -> None:
    raise AssertionError("a whole answer waits for nothing")


def test_a_cheap_or_small_answer_is_sent_whole() -> None:
    body = os.urandom(1000)
    for priority, size in ((0, 10 * len(body)), (5, 1), (-1, len(body))):
        response = paced_answer(body * (size // len(body) or 1), priority, _never_quiet, headers={},
                                media_type="application/json", piece_bytes=len(body))  # fmt: skip
        assert not isinstance(response, StreamingResponse)


def test_a_low_priority_answer_is_the_same_bytes_in_pieces_each_after_a_quiet_moment() -> None:
    body = os.urandom(10_000)
    quiet_calls: list[float] = []

    async def quiet(max_wait_s: float) -> None:
        quiet_calls.append(max_wait_s)

    async def endpoint(request: Request) -> Response:
        return paced_answer(body, -1, quiet, headers={"X-Druid-Query-Id": "q"}, media_type="application/json",
                            piece_bytes=3_000)  # fmt: skip

    async def main() -> httpx.Response:
        app = Starlette(routes=[Route("/", endpoint, methods=["POST"])])
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://b") as client:
            return await client.post("/")

    resp = asyncio.run(asyncio.wait_for(main(), timeout=30))
    assert resp.status_code == 200 and resp.content == body
    assert resp.headers["content-length"] == str(len(body)) and resp.headers["x-druid-query-id"] == "q"
    assert quiet_calls == [paced_answers.YIELD_S] * 3  # before the 2nd, 3rd and 4th of 4 pieces


def test_pieces_wait_while_a_cheap_query_runs_and_go_once_it_ends(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(paced_answers, "YIELD_S", 60.0)  # only the cheap query's end lets them go

    async def main() -> None:
        admission = Admission(max_concurrent=4, max_queued=4, laning=hilo(4, 50))
        body = b"x" * 10
        response = paced_answer(body, -1, admission.cheap_lane_quiet, headers={}, media_type="text/plain",
                                piece_bytes=4)  # fmt: skip
        assert isinstance(response, StreamingResponse)
        sent: list[bytes] = []
        release = asyncio.Event()

        async def cheap() -> None:
            async with admission.admit(priority=0):
                await release.wait()

        async def low_work() -> None:  # a low-priority query running beside does not hold pieces back
            async with admission.admit(priority=-1):
                await asyncio.sleep(3600)

        running = [asyncio.create_task(cheap()), asyncio.create_task(low_work())]
        await asyncio.sleep(0)
        assert admission.urgent_running == 1

        async def drain() -> None:
            async for piece in response.body_iterator:
                sent.append(bytes(piece) if not isinstance(piece, str) else piece.encode())

        draining = asyncio.create_task(drain())
        for _ in range(50):
            await asyncio.sleep(0.002)
        assert sent == [b"xxxx"]  # the rest waits for the cheap query
        release.set()
        await asyncio.wait_for(draining, 30)
        assert b"".join(sent) == body and len(sent) == 3
        running[1].cancel()
        await asyncio.gather(*running, return_exceptions=True)

    asyncio.run(asyncio.wait_for(main(), timeout=30))


def test_the_wait_for_the_cheap_lane_is_bounded() -> None:
    async def main() -> Any:
        admission = Admission(max_concurrent=2, max_queued=2)
        release = asyncio.Event()

        async def cheap() -> None:
            async with admission.admit(priority=0):
                await release.wait()

        task = asyncio.create_task(cheap())
        await asyncio.sleep(0)
        await asyncio.wait_for(admission.cheap_lane_quiet(0.01), 30)  # returns though the query runs
        assert admission.urgent_running == 1
        release.set()
        await task
        await asyncio.wait_for(admission.cheap_lane_quiet(3600), 30)  # nothing urgent: at once

    asyncio.run(asyncio.wait_for(main(), timeout=30))
