"""The broker's data-node client against a loopback server that answers with canned bytes: how
each way a node can fail is classified (retry on a replica, time out, or pass the node's error on)
without real data nodes."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import orjson
import pyarrow as pa
import pytest

from broker_service.data_node_client import READ_PIECE_BYTES, DataNodeClient, GatherBudget, _Reply
from broker_service.errors import NodeFailure, RemoteQueryError
from strata.discovery.server_metadata import ServerMetadata
from strata.query import parse_query
from strata.query.errors import QueryTimeout, ResourceLimitExceeded
from strata.wire import ARROW_STREAM
from timeline import Interval, SegmentDescriptor

SEGMENT = SegmentDescriptor(Interval.parse("2015-09-12/2015-09-13"), "v1", 0)
QUERY = parse_query({"queryType": "timeseries", "dataSource": "wiki", "intervals": ["2015-09-12/2015-09-13"],
                     "granularity": "all", "aggregations": [{"type": "count", "name": "n"}],
                     "context": {"queryId": "q1"}})  # fmt: skip


def arrow_bytes(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


PARTIAL = pa.table({"__segment": ["s"], "n": [3]})


def response(
    status: int, body: bytes, headers: dict[str, str] | None = None, length: int | None = None
) -> bytes:
    """Raw HTTP/1.1 bytes; `length` may claim more than is sent (a node dying mid-answer)."""
    lines = [f"HTTP/1.1 {status} X", f"Content-Length: {len(body) if length is None else length}"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


JSON_TYPE = {"Content-Type": "application/json"}
Handler = Callable[[bytes, bytes], Awaitable[bytes | None]]


def run(handler: Handler, timeout_s: float = 5.0) -> object:
    """One `client.run` against a loopback server whose `handler(head, body)` gives the raw reply
    (None: close the connection without one)."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            int(line.split(b":")[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length")
        )
        reply = await handler(head, await reader.readexactly(length))
        if reply is not None:
            writer.write(reply)
            await writer.drain()
        writer.close()

    async def go() -> object:
        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        client = DataNodeClient()
        try:
            node = ServerMetadata(f"127.0.0.1:{port}", f"127.0.0.1:{port}")
            return await asyncio.wait_for(client.run(node, QUERY, [SEGMENT], timeout_s=timeout_s), 30)
        finally:
            await client.close()
            server.close()

    return asyncio.run(go())


def canned(reply: bytes | None) -> Handler:
    async def handler(head: bytes, body: bytes) -> bytes | None:
        return reply

    return handler


def test_asks_for_exactly_its_segments_and_reads_arrow_and_missing_segments() -> None:
    seen: list[dict[str, object]] = []
    heads: list[bytes] = []

    async def handler(head: bytes, body: bytes) -> bytes:
        seen.append(orjson.loads(body))
        heads.append(head.lower())
        missing = {
            "missingSegments": [{"itvl": "2015-09-12T00:00:00.000Z/2015-09-13T00:00:00.000Z", "ver": "v0"}]
        }
        return response(200, arrow_bytes(PARTIAL), {
            "Content-Type": ARROW_STREAM, "X-Druid-Response-Context": orjson.dumps(missing).decode()})  # fmt: skip

    answer = run(handler)
    assert f"accept: {ARROW_STREAM}".encode() in heads[0]
    assert seen[0]["intervals"]["type"] == "segments"  # type: ignore[index]
    assert seen[0]["intervals"]["segments"] == [SEGMENT.to_json()]  # type: ignore[index]
    assert seen[0]["context"]["queryId"] == "q1" and seen[0]["context"]["timeout"] == 5000  # type: ignore[index]
    assert answer.table.equals(PARTIAL)  # type: ignore[attr-defined]
    assert [d.version for d in answer.missing] == ["v0"]  # type: ignore[attr-defined]


class _Failing(DataNodeClient):
    def __init__(self, failure: BaseException):
        super().__init__()
        self.failure = failure

    async def _post(self, *args: Any, **kwargs: Any) -> _Reply:
        raise self.failure


@pytest.mark.parametrize(
    ("failure", "expected"),
    [
        (aiohttp.ClientConnectionError("connection refused"), NodeFailure),
        (aiohttp.ConnectionTimeoutError("connect timed out"), NodeFailure),
        (aiohttp.ServerDisconnectedError(), NodeFailure),
        (aiohttp.ClientPayloadError("Response payload is not completed"), NodeFailure),
        (aiohttp.ClientOSError(104, "connection reset by peer"), NodeFailure),
        (aiohttp.SocketTimeoutError("read timed out"), QueryTimeout),
        (TimeoutError(), QueryTimeout),
    ],
)
def test_transport_failures_are_classified(failure: Exception, expected: type[Exception]) -> None:
    async def go() -> object:
        node = ServerMetadata("node:8083", "node:8083")
        return await _Failing(failure).run(node, QUERY, [SEGMENT], timeout_s=5.0)

    with pytest.raises(expected):
        asyncio.run(go())


def test_real_transport_failures() -> None:
    with pytest.raises(NodeFailure):  # the node closes without answering
        run(canned(None))
    with pytest.raises(NodeFailure):  # dies mid-answer: fewer bytes than its Content-Length
        run(canned(response(200, b"x" * 10, {"Content-Type": ARROW_STREAM}, length=1000)))

    async def slow(head: bytes, body: bytes) -> bytes:
        await asyncio.sleep(3)
        return response(200, arrow_bytes(PARTIAL), {"Content-Type": ARROW_STREAM})

    with pytest.raises(QueryTimeout):
        run(slow, timeout_s=0.3)


def test_a_refused_connection_is_a_node_failure() -> None:
    async def go() -> object:
        server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        server.close()
        await server.wait_closed()  # nothing listens there now
        client = DataNodeClient()
        try:
            node = ServerMetadata(f"127.0.0.1:{port}", f"127.0.0.1:{port}")
            return await client.run(node, QUERY, [SEGMENT], timeout_s=5.0)
        finally:
            await client.close()

    with pytest.raises(NodeFailure):
        asyncio.run(go())


def test_a_truncated_arrow_body_is_a_node_failure() -> None:
    body = arrow_bytes(PARTIAL)
    with pytest.raises(NodeFailure, match="truncated or invalid Arrow"):
        run(canned(response(200, body[: len(body) // 2], {"Content-Type": ARROW_STREAM})))


def test_json_where_arrow_was_asked_is_a_node_failure() -> None:
    with pytest.raises(NodeFailure, match="expected an Arrow stream"):
        run(canned(response(200, b"[]", {"Content-Type": "application/json"})))


def test_a_malformed_response_context_is_a_node_failure() -> None:
    headers = {"Content-Type": ARROW_STREAM, "X-Druid-Response-Context": "{not json"}
    with pytest.raises(NodeFailure, match="X-Druid-Response-Context"):
        run(canned(response(200, arrow_bytes(PARTIAL), headers)))


def test_node_errors_keep_the_nodes_body_and_status() -> None:
    body = {"error": "Invalid input", "errorMessage": "bad filter", "host": "node:8083"}
    with pytest.raises(RemoteQueryError) as e:
        run(canned(response(400, orjson.dumps(body), JSON_TYPE)))
    assert e.value.status == 400 and e.value.to_body()["errorMessage"] == "bad filter"
    with pytest.raises(NodeFailure) as failure:  # a 5xx goes to a replica, with the node's error kept
        run(
            canned(
                response(500, orjson.dumps({"error": "Unknown exception", "errorMessage": "disk"}), JSON_TYPE)
            )
        )
    assert failure.value.remote is not None and failure.value.remote.error_message == "disk"
    with pytest.raises(QueryTimeout):
        run(
            canned(response(504, orjson.dumps({"error": "Query timeout", "errorMessage": "slow"}), JSON_TYPE))
        )
    with pytest.raises(NodeFailure, match="HTTP 502"):  # a proxy's HTML page, not Druid JSON
        run(canned(response(502, b"<html>bad gateway</html>", {"Content-Type": "text/html"})))


class _ResetOnce(DataNodeClient):
    """The first post fails as a kept-alive connection closed under it does; the next one answers."""

    def __init__(self, failure: BaseException):
        super().__init__()
        self.failure = failure
        self.posts = 0

    async def _post(self, *args: Any, **kwargs: Any) -> _Reply:
        self.posts += 1
        if self.posts == 1:
            raise self.failure
        return await super()._post(*args, **kwargs)


@pytest.mark.parametrize(
    "failure", [aiohttp.ServerDisconnectedError(), aiohttp.ClientOSError(104, "connection reset by peer")]
)
def test_a_connection_lost_before_the_answer_is_tried_once_more(failure: Exception) -> None:
    """A node closing an idle kept-alive connection as the broker reuses it is no node failure."""

    async def handler(head: bytes, body: bytes) -> bytes:
        return response(200, arrow_bytes(PARTIAL), {"Content-Type": ARROW_STREAM})

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            int(x.split(b":")[1]) for x in head.split(b"\r\n") if x.lower().startswith(b"content-length")
        )
        writer.write(await handler(head, await reader.readexactly(length)))
        await writer.drain()
        writer.close()

    async def go() -> tuple[object, int]:
        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        client = _ResetOnce(failure)
        try:
            node = ServerMetadata(f"127.0.0.1:{port}", f"127.0.0.1:{port}")
            answer = await asyncio.wait_for(client.run(node, QUERY, [SEGMENT], timeout_s=5.0), 30)
            return answer, client.posts
        finally:
            await client.close()
            server.close()

    answer, posts = asyncio.run(go())
    assert posts == 2 and answer.table.equals(PARTIAL)  # type: ignore[attr-defined]


def test_partials_are_read_within_the_querys_gather_budget() -> None:
    """One budget over every node of a query (Druid's maxScatterGatherBytes): the answers are counted
    a piece at a time as they arrive, and the one that passes the budget ends the query; a node's
    error body is not counted."""
    rows = 400_000
    big = arrow_bytes(pa.table({"__segment": ["s"] * rows, "n": list(range(rows))}))  # 5.2 MB: 5 pieces
    sent: list[int] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            int(x.split(b":")[1]) for x in head.split(b"\r\n") if x.lower().startswith(b"content-length")
        )
        query = orjson.loads(await reader.readexactly(length))
        refused = query["context"].get("refuse")
        body = orjson.dumps({"error": "Resource limit exceeded", "errorMessage": "no"}) if refused else big
        kind = "application/json" if refused else ARROW_STREAM
        writer.write(response(400 if refused else 200, body, {"Content-Type": kind}))
        sent.append(len(body))
        with contextlib.suppress(ConnectionError):
            await writer.drain()
        writer.close()

    async def go() -> None:
        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        node = ServerMetadata(f"127.0.0.1:{port}", f"127.0.0.1:{port}")
        client = DataNodeClient()
        try:
            budget = GatherBudget(len(big) * 2 - 1, "q1")
            first = await client.run(node, QUERY, [SEGMENT], 5.0, budget=budget)
            assert first.table is not None and first.table.num_rows == rows and budget.taken == len(big)
            refusal = QUERY.with_context(QUERY.context.with_values(refuse=True))
            with pytest.raises(RemoteQueryError):
                await client.run(node, refusal, [SEGMENT], 5.0, budget=budget)
            assert budget.taken == len(big)
            with pytest.raises(
                ResourceLimitExceeded, match=r"Query\[q1\] url\[http://127.0.0.1:\d+/druid/v2/\] max"
            ):
                await client.run(node, QUERY, [SEGMENT], 5.0, budget=budget)
            assert budget.limit < budget.taken <= budget.limit + READ_PIECE_BYTES  # it stopped at the limit
            unlimited = await client.run(node, QUERY, [SEGMENT], 5.0)
            assert unlimited.table is not None and unlimited.table.num_rows == rows
        finally:
            await client.close()
            server.close()

    asyncio.run(asyncio.wait_for(go(), 60))
