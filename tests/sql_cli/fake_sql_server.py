"""A stand-in for the broker's SQL endpoint, for the CLI's unit tests only.

It answers a few fixed statements the way Druid's SQL API does (arrayLines with the three header
rows, Druid's error body, DELETE to cancel), so the client's parsing, formats, exit codes and
Ctrl-C handling are tested without a cluster. The real broker is exercised by
tests/sql_cli/test_cli_cluster.py.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import Any

import orjson
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

ROWS: list[list[Any]] = [
    ["2015-09-12T00:00:00.000Z", "#en.wikipedia", 10, 1.5],
    ["2015-09-12T01:00:00.000Z", "#fr.wikipedia", 3, None],
    ["2015-09-12T02:00:00.000Z", 'quote "this", comma\ttab', -1, 0.25],
]
COLUMNS = ["__time", "channel", "edits", "ratio"]
TYPES = ["LONG", "STRING", "LONG", "DOUBLE"]
SQL_TYPES = ["TIMESTAMP", "VARCHAR", "BIGINT", "DOUBLE"]


class FakeSqlServer:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.cancelled: list[str] = []
        self._running: dict[str, asyncio.Event] = {}
        self.port = 0

    def _header(self, columns: list[str], types: list[str], sql_types: list[str]) -> bytes:
        return b"".join(orjson.dumps(r) + b"\n" for r in (columns, types, sql_types))

    async def sql(self, request: Request) -> Response:
        body = orjson.loads(await request.body())
        self.requests.append(body)
        query = body["query"].strip()
        query_id = body.get("context", {}).get("sqlQueryId", "q")
        if query.upper().startswith("SELECT BAD"):
            return JSONResponse(
                {
                    "error": "druidException",
                    "errorCode": "invalidInput",
                    "persona": "USER",
                    "category": "INVALID_INPUT",
                    "context": {"sourceType": "sql"},
                    "errorMessage": "Column 'bad' not found in any table (line [1], column [8])",
                },
                status_code=400,
            )
        if query.upper().startswith("SELECT SLEEP"):
            stop = self._running[query_id] = asyncio.Event()

            async def slow() -> AsyncIterator[bytes]:
                yield self._header(["x"], ["LONG"], ["BIGINT"])
                try:
                    await asyncio.wait_for(stop.wait(), timeout=30)
                except TimeoutError:
                    yield b"[1]\n\n"

            return StreamingResponse(slow(), media_type="text/plain")
        if query.upper().startswith("SELECT TRUNCATED"):
            return Response(self._header(["x"], ["LONG"], ["BIGINT"]) + b"[1]\n", media_type="text/plain")
        if "INFORMATION_SCHEMA.COLUMNS" in query:
            rows = [["__time", "TIMESTAMP", "NO"], ["channel", "VARCHAR", "YES"]]
            head = self._header(["COLUMN_NAME", "DATA_TYPE", "IS_NULLABLE"], ["STRING"] * 3, ["VARCHAR"] * 3)
        elif "INFORMATION_SCHEMA.TABLES" in query:
            rows = [["wikipedia"]]
            head = self._header(["TABLE_NAME"], ["STRING"], ["VARCHAR"])
        elif "LIMIT 0" in query.upper():
            rows, head = [], self._header(COLUMNS, TYPES, SQL_TYPES)
        else:
            rows, head = ROWS, self._header(COLUMNS, TYPES, SQL_TYPES)
        payload = head + b"".join(orjson.dumps(r) + b"\n" for r in rows) + b"\n"
        return Response(payload, media_type="text/plain")

    async def cancel(self, request: Request) -> Response:
        query_id = request.path_params["query_id"]
        event = self._running.pop(query_id, None)
        if event is None:
            return Response(status_code=404)
        self.cancelled.append(query_id)
        event.set()
        return Response(status_code=202)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@contextmanager
def fake_sql_server() -> Iterator[FakeSqlServer]:
    fake = FakeSqlServer()
    app = Starlette(routes=[
        Route("/druid/v2/sql/", fake.sql, methods=["POST"]),
        Route("/druid/v2/sql/{query_id}", fake.cancel, methods=["DELETE"]),
    ])  # fmt: skip
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    fake.port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    try:
        yield fake
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
