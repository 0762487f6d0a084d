"""HTTP client for data nodes: one request per server per query, naming exactly its segments.

Pooled keep-alive connections (httpx), partials as Arrow IPC streams decoded off the event loop
when large, `missingSegments` read from `X-Druid-Response-Context`, and per-server in-flight
counts that the connectionCount server selection uses.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import httpx
import orjson
import pyarrow as pa

from broker_service.errors import NodeFailure, RemoteQueryError
from discovery.server_metadata import ServerMetadata
from query import Query
from query.errors import QueryTimeout
from query.segment_spec import SegmentsSpec
from timeline import SegmentDescriptor
from wire import (
    ARROW_STREAM,
    JSON,
    PER_SEGMENT_PARTIALS,
    RESPONSE_CONTEXT_HEADER,
    decode_partials,
    error_body,
    parse_missing_segments,
)

log = logging.getLogger(__name__)

DECODE_IN_THREAD_BYTES = 256 * 1024


@dataclass
class NodeResponse:
    server: ServerMetadata
    table: pa.Table | None
    missing: list[SegmentDescriptor] = field(default_factory=list)
    bytes_received: int = 0


class DataNodeClient:
    def __init__(
        self,
        *,
        max_connections_per_node: int = 32,
        connect_timeout_s: float = 5.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ):
        """`transport` replaces the network (an `httpx.MockTransport` in tests of failure handling)."""
        self._http = httpx.AsyncClient(
            transport=transport,
            timeout=httpx.Timeout(None, connect=connect_timeout_s),
            limits=httpx.Limits(
                max_connections=max_connections_per_node * 8,
                max_keepalive_connections=max_connections_per_node * 4,
                keepalive_expiry=60.0,
            ),
        )
        self._in_flight: Counter[str] = Counter()

    def open_connections(self, server_name: str) -> int:
        return self._in_flight[server_name]

    async def close(self) -> None:
        await self._http.aclose()

    async def run(
        self,
        server: ServerMetadata,
        query: Query,
        descriptors: Sequence[SegmentDescriptor],
        timeout_s: float | None,
        *,
        per_segment: bool = True,
    ) -> NodeResponse:
        """Run `query` on `server` for exactly `descriptors`; raise NodeFailure when it can't answer.

        `per_segment=False`: the broker caches none of these partials, so the node may merge them.
        """
        downstream = query.with_segment_spec(SegmentsSpec(tuple(descriptors)))
        context: dict[str, object] = {"queryId": query.context.query_id}
        if not per_segment:
            context[PER_SEGMENT_PARTIALS] = False
        if timeout_s is not None:
            context["timeout"] = max(1, int(timeout_s * 1000))
        downstream = downstream.with_context(query.context.with_values(**context))
        body = orjson.dumps(downstream.to_json())
        url = f"http://{server.host}/druid/v2/"
        headers = {"Content-Type": JSON, "Accept": ARROW_STREAM}
        self._in_flight[server.name] += 1
        try:
            response = await self._http.post(url, content=body, headers=headers, timeout=timeout_s)
        except httpx.ConnectTimeout as e:
            raise NodeFailure(server.name, f"connect timeout: {e}") from None
        except httpx.TimeoutException:
            message = f"Query [{query.context.query_id}] timed out waiting for {server.name}"
            raise QueryTimeout(message) from None
        except httpx.HTTPError as e:  # refused, reset, died mid-response
            raise NodeFailure(server.name, f"{type(e).__name__}: {e}") from None
        finally:
            self._in_flight[server.name] -= 1
            if self._in_flight[server.name] <= 0:
                del self._in_flight[server.name]
        return await self._read(server, response)

    async def _read(self, server: ServerMetadata, response: httpx.Response) -> NodeResponse:
        status = response.status_code
        if status != 200:
            remote = _remote_error(response, server)
            if status == 504:
                raise QueryTimeout(remote.error_message, host=remote.host)
            if status >= 500 and remote.body.get("error") not in ("Query cancelled", "Query interrupted"):
                raise NodeFailure(server.name, f"HTTP {status}: {remote.error_message}", remote)
            raise remote
        try:
            missing = parse_missing_segments(response.headers.get(RESPONSE_CONTEXT_HEADER))
        except (ValueError, KeyError, TypeError) as e:
            raise NodeFailure(server.name, f"malformed {RESPONSE_CONTEXT_HEADER}: {e}") from None
        payload = response.content
        content_type = response.headers.get("content-type", "")
        if ARROW_STREAM not in content_type:
            raise NodeFailure(server.name, f"expected an Arrow stream, got {content_type or 'nothing'}")
        try:
            if len(payload) > DECODE_IN_THREAD_BYTES:
                table = await asyncio.to_thread(decode_partials, payload)
            else:
                table = decode_partials(payload)
        except (pa.ArrowInvalid, OSError) as e:
            raise NodeFailure(server.name, f"truncated or invalid Arrow stream: {e}") from None
        return NodeResponse(server, table, missing, len(payload))

    async def cancel(self, server: ServerMetadata, query_id: str) -> None:
        """Forward a cancellation; best effort (the node may already be done or gone)."""
        try:
            await self._http.delete(f"http://{server.host}/druid/v2/{query_id}", timeout=2.0)
        except httpx.HTTPError as e:
            log.debug("cancel of %s on %s failed: %s", query_id, server.name, e)


def _remote_error(response: httpx.Response, server: ServerMetadata) -> RemoteQueryError:
    body = error_body(response.content, response.text, response.status_code, server.name)
    return RemoteQueryError(body, response.status_code, server.name)
