"""HTTP client for data nodes: one request per server per query, naming exactly its segments.

Pooled keep-alive connections (aiohttp: about 0.15 ms of CPU per request where httpx spent about
1 ms, which on a 2-core broker was most of a cold query's own cost), partials as Arrow IPC streams
decoded off the event loop when large, `missingSegments` read from `X-Druid-Response-Context`, and
per-server in-flight counts that the connectionCount server selection uses. A query's partials are
read within its `GatherBudget` (Druid's maxScatterGatherBytes): a piece at a time, counted across
all its nodes, so a node's answer larger than the broker may hold ends at the limit, not in memory.
"""

from __future__ import annotations

import logging
import ssl
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import orjson
import pyarrow as pa

from broker_service.errors import NodeFailure, RemoteQueryError
from broker_service.lookup_keys import lookup_fingerprints
from strata.discovery.server_metadata import ServerMetadata
from strata.lookups.registry import LOOKUP_FINGERPRINTS
from strata.query import Query
from strata.query.errors import QueryTimeout, ResourceLimitExceeded
from strata.query.segment_spec import SegmentsSpec
from strata.server.priority_threads import run_for_priority
from strata.wire import (
    ARROW_STREAM,
    JSON,
    PER_SEGMENT_PARTIALS,
    RESPONSE_CONTEXT_HEADER,
    decode_partials,
    error_body,
    parse_missing_segments,
)
from timeline import SegmentDescriptor

log = logging.getLogger(__name__)

DECODE_IN_THREAD_BYTES = 256 * 1024
READ_PIECE_BYTES = 1 << 20  # what a budgeted read takes at a time


@dataclass
class GatherBudget:
    """Bytes one query may still gather from data nodes, shared by all its requests."""

    limit: int
    query_id: str
    taken: int = 0

    def take(self, size: int, url: str) -> None:
        self.taken += size
        if self.taken > self.limit:
            raise ResourceLimitExceeded(
                f"Query[{self.query_id}] url[{url}] max scatter-gather bytes limit reached. The query's "
                f"partials from data nodes passed {self.limit} bytes (maxScatterGatherBytes; the broker's "
                "--max-scatter-gather-bytes): narrow it (filters, a shorter interval, fewer columns)"
            )


@dataclass(frozen=True, slots=True)
class _Reply:
    """What the client reads of a node's answer: enough to classify it, nothing lazy."""

    status: int
    headers: Mapping[str, str]  # case-insensitive (aiohttp's parsed headers)
    content: bytes

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")


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
        headers: Mapping[str, str] | None = None,  # sent on every call: the internal identity
        tls_ca: str | None = None,  # the nodes serve HTTPS with certificates from this CA
    ):
        self._headers = dict(headers or {})
        self._tls_ca = tls_ca
        self._scheme = "https" if tls_ca else "http"
        self._max_connections = max_connections_per_node * 8
        self._connect_timeout_s = connect_timeout_s
        self._session: aiohttp.ClientSession | None = None  # made on the event loop, at first use
        self._in_flight: Counter[str] = Counter()

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None:
            tls = ssl.create_default_context(cafile=self._tls_ca) if self._tls_ca else None
            connector = aiohttp.TCPConnector(
                limit=self._max_connections, keepalive_timeout=60.0, ssl=tls or True
            )
            self._session = aiohttp.ClientSession(
                connector=connector, auto_decompress=True, headers=self._headers
            )
        return self._session

    def open_connections(self, server_name: str) -> int:
        return self._in_flight[server_name]

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def run(
        self,
        server: ServerMetadata,
        query: Query,
        descriptors: Sequence[SegmentDescriptor],
        timeout_s: float | None,
        *,
        per_segment: bool = True,
        budget: GatherBudget | None = None,
    ) -> NodeResponse:
        """Run `query` on `server` for exactly `descriptors`; raise NodeFailure when it can't answer.

        `per_segment=False`: the broker caches none of these partials, so the node may merge them.
        `budget`: the query's bytes left to gather; past them, ResourceLimitExceeded.
        """
        downstream = query.with_segment_spec(SegmentsSpec(tuple(descriptors)))
        context: dict[str, object] = {"queryId": query.context.query_id}
        if fingerprints := lookup_fingerprints(query):
            context[LOOKUP_FINGERPRINTS] = fingerprints
        if not per_segment:
            context[PER_SEGMENT_PARTIALS] = False
        if timeout_s is not None:
            context["timeout"] = max(1, int(timeout_s * 1000))
        downstream = downstream.with_context(query.context.with_values(**context))
        body = orjson.dumps(downstream.to_json())
        url = f"{self._scheme}://{server.host}/druid/v2/"
        headers = {"Content-Type": JSON, "Accept": ARROW_STREAM}
        self._in_flight[server.name] += 1
        try:
            try:
                reply = await self._post(url, body, headers, timeout_s, budget)
            except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError):
                # a kept-alive connection the node closed just as it was reused (seen under load):
                # a query reads only, so it is sent once more, on a fresh connection
                reply = await self._post(url, body, headers, timeout_s, budget)
        except aiohttp.ConnectionTimeoutError as e:
            raise NodeFailure(server.name, f"connect timeout: {e or 'no connection'}") from None
        except TimeoutError:  # the query's time ran out (aiohttp's read timeouts are TimeoutErrors too)
            message = f"Query [{query.context.query_id}] timed out waiting for {server.name}"
            raise QueryTimeout(message) from None
        except aiohttp.ClientError as e:  # refused, reset, died mid-response
            raise NodeFailure(server.name, f"{type(e).__name__}: {e}") from None
        finally:
            self._in_flight[server.name] -= 1
            if self._in_flight[server.name] <= 0:
                del self._in_flight[server.name]
        return await self._read(server, reply, query.context.priority)

    async def _post(
        self,
        url: str,
        body: bytes,
        headers: dict[str, str],
        timeout_s: float | None,
        budget: GatherBudget | None,
    ) -> _Reply:
        timeout = aiohttp.ClientTimeout(total=timeout_s, sock_connect=self._connect_timeout_s)
        async with self._http().post(url, data=body, headers=headers, timeout=timeout) as response:
            if budget is None or response.status != 200:
                return _Reply(response.status, response.headers, await response.read())
            pieces = []
            async for piece in response.content.iter_chunked(READ_PIECE_BYTES):
                budget.take(len(piece), url)  # past it, leaving the block drops the connection
                pieces.append(piece)
            return _Reply(response.status, response.headers, b"".join(pieces))

    async def _read(self, server: ServerMetadata, response: _Reply, priority: int) -> NodeResponse:
        status = response.status
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
                table = await run_for_priority(priority, decode_partials, payload)
            else:
                table = decode_partials(payload)
        except (pa.ArrowInvalid, OSError) as e:
            raise NodeFailure(server.name, f"truncated or invalid Arrow stream: {e}") from None
        return NodeResponse(server, table, missing, len(payload))

    async def status(self, server: ServerMetadata, timeout_s: float = 2.0) -> Any:
        """The node's `GET /status` body; raises aiohttp.ClientError, TimeoutError or ValueError."""
        timeout = aiohttp.ClientTimeout(total=timeout_s)
        async with self._http().get(f"{self._scheme}://{server.host}/status", timeout=timeout) as response:
            if response.status != 200:
                raise ValueError(f"HTTP {response.status}")
            return orjson.loads(await response.read())

    async def cancel(self, server: ServerMetadata, query_id: str) -> None:
        """Forward a cancellation; best effort (the node may already be done or gone)."""
        url = f"{self._scheme}://{server.host}/druid/v2/{query_id}"
        try:
            async with self._http().delete(url, timeout=aiohttp.ClientTimeout(total=2.0)) as response:
                await response.read()
        except (aiohttp.ClientError, TimeoutError) as e:
            log.debug("cancel of %s on %s failed: %s", query_id, server.name, e)


def _remote_error(response: _Reply, server: ServerMetadata) -> RemoteQueryError:
    body = error_body(response.content, response.text, response.status, server.name)
    return RemoteQueryError(body, response.status, server.name)
