"""The broker's data-node client on an `httpx.MockTransport`: how each way a node can fail is
classified (retry on a replica, time out, or pass the node's error on) without real servers."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import httpx
import orjson
import pyarrow as pa
import pytest

from broker_service.data_node_client import DataNodeClient
from broker_service.errors import NodeFailure, RemoteQueryError
from discovery.server_metadata import ServerMetadata
from query import parse_query
from query.errors import QueryTimeout
from timeline import Interval, SegmentDescriptor
from wire import ARROW_STREAM

SERVER = ServerMetadata("node:8083", "node:8083")
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


def run(handler: Callable[[httpx.Request], httpx.Response]) -> object:
    async def go() -> object:
        client = DataNodeClient(transport=httpx.MockTransport(handler))
        try:
            return await client.run(SERVER, QUERY, [SEGMENT], timeout_s=5.0)
        finally:
            await client.close()

    return asyncio.run(go())


def test_asks_for_exactly_its_segments_and_reads_arrow_and_missing_segments() -> None:
    seen: list[dict[str, object]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(orjson.loads(request.content))
        assert request.headers["accept"] == ARROW_STREAM
        missing = {
            "missingSegments": [{"itvl": "2015-09-12T00:00:00.000Z/2015-09-13T00:00:00.000Z", "ver": "v0"}]
        }
        return httpx.Response(200, content=arrow_bytes(PARTIAL), headers={
            "content-type": ARROW_STREAM, "X-Druid-Response-Context": orjson.dumps(missing).decode()})  # fmt: skip

    response = run(handler)
    assert seen[0]["intervals"]["type"] == "segments"  # type: ignore[index]
    assert seen[0]["intervals"]["segments"] == [SEGMENT.to_json()]  # type: ignore[index]
    assert seen[0]["context"]["queryId"] == "q1" and seen[0]["context"]["timeout"] == 5000  # type: ignore[index]
    assert response.table.equals(PARTIAL)  # type: ignore[attr-defined]
    assert [d.version for d in response.missing] == ["v0"]  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("failure", "expected"),
    [
        (httpx.ConnectError("connection refused"), NodeFailure),
        (httpx.ConnectTimeout("connect timed out"), NodeFailure),
        (
            httpx.RemoteProtocolError("peer closed connection without sending complete message body"),
            NodeFailure,
        ),
        (httpx.ReadError("connection reset by peer"), NodeFailure),
        (httpx.ReadTimeout("read timed out"), QueryTimeout),
    ],
)
def test_transport_failures(failure: Exception, expected: type[Exception]) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise failure

    with pytest.raises(expected):
        run(handler)


def test_a_truncated_arrow_body_is_a_node_failure() -> None:
    body = arrow_bytes(PARTIAL)
    with pytest.raises(NodeFailure, match="truncated or invalid Arrow"):
        run(
            lambda request: httpx.Response(
                200, content=body[: len(body) // 2], headers={"content-type": ARROW_STREAM}
            )
        )


def test_json_where_arrow_was_asked_is_a_node_failure() -> None:
    with pytest.raises(NodeFailure, match="expected an Arrow stream"):
        run(lambda request: httpx.Response(200, json=[]))


def test_a_malformed_response_context_is_a_node_failure() -> None:
    headers = {"content-type": ARROW_STREAM, "X-Druid-Response-Context": "{not json"}
    with pytest.raises(NodeFailure, match="X-Druid-Response-Context"):
        run(lambda request: httpx.Response(200, content=arrow_bytes(PARTIAL), headers=headers))


def test_node_errors_keep_the_nodes_body_and_status() -> None:
    body = {"error": "Invalid input", "errorMessage": "bad filter", "host": "node:8083"}
    with pytest.raises(RemoteQueryError) as e:
        run(lambda request: httpx.Response(400, json=body))
    assert e.value.status == 400 and e.value.to_body()["errorMessage"] == "bad filter"
    with pytest.raises(NodeFailure) as failure:  # a 5xx goes to a replica, with the node's error kept
        run(lambda request: httpx.Response(500, json={"error": "Unknown exception", "errorMessage": "disk"}))
    assert failure.value.remote is not None and failure.value.remote.error_message == "disk"
    with pytest.raises(QueryTimeout):
        run(lambda request: httpx.Response(504, json={"error": "Query timeout", "errorMessage": "slow"}))
    with pytest.raises(NodeFailure, match="HTTP 502"):  # a proxy's HTML page, not Druid JSON
        run(lambda request: httpx.Response(502, text="<html>bad gateway</html>"))
