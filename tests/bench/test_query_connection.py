"""bench.measure's raw-socket client reads both framings a broker answers with (a native answer by
Content-Length, a SQL one chunked) on one keep-alive connection, and bench.multi_value counts rows
in every row shape it posts. A loopback server written here answers with bytes fixed in the test."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from typing import Any

import orjson
import pytest

from bench.measure import QueryConnection
from bench.multi_value import endpoint, row_total

ROWS: list[list[Any]] = [[[1, None, 3], 2, 10], [None, 1, 5], [[], 4, 7], ['é\\"', 1, 1]]


def _chunked(body: bytes, sizes: list[int]) -> bytes:
    out, at = b"", 0
    for size in sizes:
        piece = body[at : at + size]
        at += size
        out += f"{len(piece):x};ext=1\r\n".encode() + piece + b"\r\n"
    assert at >= len(body)
    return out + b"0\r\n\r\n"


@pytest.fixture
def server() -> Iterator[tuple[str, list[bytes]]]:
    """Answers the first request chunked in uneven pieces, the second by Content-Length, sent a
    few bytes a write so the client sees every split; records each request line."""
    body = orjson.dumps(ROWS)
    answers = [
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + _chunked(body, [1, 7, 2, len(body)]),
        b"HTTP/1.1 200 OK\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body,
    ]
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(10)
    seen: list[bytes] = []

    def serve() -> None:
        conn, _ = listener.accept()
        conn.settimeout(10)
        with conn:
            for answer in answers:
                request = b""
                while b"\r\n\r\n" not in request:
                    request += conn.recv(65536)
                head, _, rest = request.partition(b"\r\n\r\n")
                length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
                while len(rest) < length:
                    rest += conn.recv(65536)
                seen.append(head.split(b"\r\n")[0])
                for at in range(0, len(answer), 5):
                    conn.sendall(answer[at : at + 5])

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}", seen
    finally:
        listener.close()
        thread.join(timeout=10)


def test_chunked_and_sized_answers_on_one_connection(server: tuple[str, list[bytes]]) -> None:
    url, seen = server
    client = QueryConnection(url, timeout=10)
    try:
        sql = {"query": "SELECT 1", "resultFormat": "array"}
        assert client.post(sql, endpoint(sql)) == ROWS
        native = {"queryType": "groupBy"}
        assert client.post(native, endpoint(native)) == ROWS
    finally:
        client.close()
    assert seen == [b"POST /druid/v2/sql HTTP/1.1", b"POST /druid/v2/ HTTP/1.1"]


def test_rows_are_counted_in_every_row_shape() -> None:
    objects = [
        {"version": "v1", "timestamp": "t", "event": {"nums": r[0], "rows": r[1], "added": r[2]}}
        for r in ROWS
    ]
    assert row_total(objects) == 8
    assert row_total(ROWS) == 8  # resultAsArray, SQL's `array`: the count before the sum
    assert row_total([{"timestamp": "t", "result": {"rows": 3}}]) == 3
    assert row_total([{"timestamp": "t", "result": [{"rows": 3}, {"rows": 4}]}]) == 7
