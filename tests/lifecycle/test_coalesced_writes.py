"""Responses written as one piece per loop turn (strata.server.coalesced_writes): the transport in
isolation, then a real uvicorn server with the protocol answering every kind of response."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from strata.cli.local_servers import free_port
from strata.server.coalesced_writes import FLUSH_AT_BYTES, CoalescingHttpToolsProtocol, CoalescingTransport


class Recorder:
    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.events: list[str] = []

    def write(self, data: bytes) -> None:
        self.writes.append(bytes(data))

    def close(self) -> None:
        self.events.append("close")

    def abort(self) -> None:
        self.events.append("abort")

    def get_write_buffer_size(self) -> int:
        return 0

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return f"info:{name}"


def test_writes_of_one_turn_leave_as_one_piece() -> None:
    async def scenario() -> None:
        inner = Recorder()
        t = CoalescingTransport(inner, asyncio.get_running_loop())  # type: ignore[arg-type]
        t.write(b"HTTP/1.1 200 OK\r\n\r\n")
        buffer = bytearray(b"body")
        t.write(buffer)
        buffer[:] = b"XXXX"  # the caller may reuse its buffer once write returns
        assert inner.writes == [] and t.get_write_buffer_size() == 23
        await asyncio.sleep(0)
        assert inner.writes == [b"HTTP/1.1 200 OK\r\n\r\nbody"]
        t.write(b"x" * FLUSH_AT_BYTES)  # large: at once
        assert len(inner.writes) == 2
        t.write(b"tail")
        t.close()  # what is held leaves before the close
        assert inner.writes[-1] == b"tail" and inner.events == ["close"]
        t.write(b"lost")
        t.abort()
        await asyncio.sleep(0)
        assert inner.writes[-1] == b"tail" and inner.events == ["close", "abort"]
        assert t.get_extra_info("peername") == "info:peername"

    asyncio.run(scenario())


class Passing(Recorder):
    """A recorder that also keeps each object it was handed."""

    def __init__(self) -> None:
        super().__init__()
        self.passed: list[object] = []

    def write(self, data: bytes) -> None:
        self.passed.append(data)
        super().write(data)


def test_a_large_piece_follows_what_is_held_without_a_copy() -> None:
    async def scenario() -> None:
        inner = Passing()
        t = CoalescingTransport(inner, asyncio.get_running_loop())  # type: ignore[arg-type]
        t.write(b"HTTP/1.1 200 OK\r\n\r\n")
        body = memoryview(b"z" * (FLUSH_AT_BYTES + 1))
        t.write(body)
        assert inner.writes == [b"HTTP/1.1 200 OK\r\n\r\n", bytes(body)]  # in order
        assert inner.passed[1] is body  # handed on as it is: the transport copies what it keeps
        await asyncio.sleep(0)
        assert len(inner.writes) == 2

    asyncio.run(scenario())


async def small(request: Request) -> Response:
    return Response(b'{"ok":true}', media_type="application/json", headers={"X-Druid-Query-Id": "q"})


async def large(request: Request) -> Response:
    return Response(b"y" * 1_000_000, media_type="application/octet-stream")


async def streamed(request: Request) -> StreamingResponse:
    async def chunks() -> AsyncIterator[bytes]:
        for i in range(3):
            await asyncio.sleep(0.01)
            yield f"chunk{i};".encode()

    return StreamingResponse(chunks(), media_type="text/plain")


async def not_modified(request: Request) -> Response:
    return Response(status_code=304, headers={"ETag": '"e"'})


@contextmanager
def server() -> Iterator[str]:
    app = Starlette(routes=[Route("/small", small, methods=["GET", "HEAD", "POST"]), Route("/large", large),
                            Route("/streamed", streamed), Route("/304", not_modified)])  # fmt: skip
    port = free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, http=CoalescingHttpToolsProtocol,
                            log_level="warning", lifespan="off")  # fmt: skip
    running = uvicorn.Server(config)
    thread = threading.Thread(target=running.run, daemon=True)
    thread.start()
    for _ in range(500):
        if running.started:
            break
        threading.Event().wait(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        running.should_exit = True
        thread.join(10)


def test_a_real_server_answers_every_kind_of_response() -> None:
    with server() as url, httpx.Client(base_url=url, timeout=10) as http:
        for _ in range(50):  # one keep-alive connection, response after response
            r = http.post("/small", content=b"{}")
            assert (r.status_code, r.content, r.headers["x-druid-query-id"]) == (200, b'{"ok":true}', "q")
        head = http.head("/small")
        assert head.status_code == 200 and head.content == b"" and head.headers["content-length"] == "11"
        assert http.get("/large").content == b"y" * 1_000_000
        assert http.get("/streamed").text == "chunk0;chunk1;chunk2;"
        r304 = http.get("/304")
        assert r304.status_code == 304 and r304.headers["etag"] == '"e"'
        assert http.get("/small").json() == {"ok": True}  # the connection still in step after all that
