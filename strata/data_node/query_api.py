"""The data node's native query endpoint: `POST /druid/v2/` and `DELETE /druid/v2/{queryId}`.

A plain client gets Druid's merged JSON. The broker asks for `application/vnd.apache.arrow.stream`
and gets one partial result per segment (column `__segment`) so it can cache and merge each one.
When the query names segments (`{"type":"segments"}`), those this node does not serve are listed
in `X-Druid-Response-Context` as `missingSegments`, as Druid does, and the rest are answered.

Query work is CPU-bound DuckDB; it runs in a worker pool, bounded by the query's timeout, and a
running query can be interrupted by its id. A broker's count/min/max that parsed Parquet footers
answer is answered on the event loop instead (no file read, no thread hop).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

import duckdb
import pyarrow as pa
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from strata.data_node.priority_pools import PriorityPools
from strata.engine import (
    SegmentInput,
    broker_partials_from_footers,
    require_table_source,
    run_for_broker,
    run_merged,
)
from strata.engine.lookup_tables import query_lookups
from strata.engine.whole_scan import whole_scan_batches, whole_scan_schema
from strata.lookups.registry import LOOKUP_FINGERPRINTS, check_fingerprints
from strata.query import Query, QueryError, parse_query
from strata.query.duck import connection, discard_connection, engine_limits
from strata.query.engine_errors import query_engine_error, unforeseen
from strata.query.errors import QueryCancelled, QueryTimeout
from strata.query.request_body import decode_query_body
from strata.query.segment_spec import SegmentsSpec
from strata.server.json_response import json_response
from strata.wire import (
    ARROW_STREAM,
    QUERY_ID_HEADER,
    RESPONSE_CONTEXT_HEADER,
    encode_partials,
    missing_segments_context,
    partials_stream,
    wants_arrow,
)
from timeline import SegmentDescriptor

log = logging.getLogger(__name__)

MAX_REQUEST_BYTES = 16 * 1024 * 1024
LARGE_BODY_BYTES = 65_536  # bodies past this are parsed in a worker thread
WHOLE_SCAN_BATCH_ROWS = 65_536


class LocalSegments(Protocol):
    """What this node serves, as the query path needs it."""

    def inputs_for_intervals(self, query: Query) -> list[SegmentInput]: ...

    def input_for_descriptor(
        self, data_source: str, descriptor: SegmentDescriptor
    ) -> SegmentInput | None: ...


@dataclass
class _Running:
    query_id: str
    started: float
    cancelled: threading.Event = field(default_factory=threading.Event)
    conn: Any = None


class RunningQueries:
    """Queries in flight, so `DELETE /druid/v2/{id}` can interrupt their DuckDB work."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: dict[str, _Running] = {}

    def start(self, query_id: str) -> _Running:
        entry = _Running(query_id, time.monotonic())
        with self._lock:
            self._running[query_id] = entry
        return entry

    def finish(self, entry: _Running) -> None:
        with self._lock:
            if self._running.get(entry.query_id) is entry:
                del self._running[entry.query_id]

    def cancel(self, query_id: str) -> bool:
        with self._lock:
            entry = self._running.get(query_id)
        if entry is None:
            return False
        entry.cancelled.set()
        if entry.conn is not None:
            entry.conn.interrupt()
        return True

    def __len__(self) -> int:
        return len(self._running)


class QueryEndpoint:
    def __init__(self, segments: LocalSegments, host: str, pool: ThreadPoolExecutor | None = None):
        self.segments = segments
        self.host = host
        # one worker per query the engine's memory holds at once (strata.query.duck.EngineLimits),
        # some of them for queries of negative context priority, which the OS gives the CPU last
        self.pools: PriorityPools | None = None
        if pool is None:
            slots = engine_limits().slots
            low = max(1, slots // 4)
            self.pools = PriorityPools(workers=max(1, slots - low), low_workers=low)
        self.pool: Executor = pool if pool is not None else self.pools.normal  # type: ignore[union-attr]
        self.running = RunningQueries()
        self.on_query: Callable[[str, str, float, int], None] | None = None  # (dataSource, type, s, status)
        self.on_segments: Callable[[float, float, int], None] | None = None  # (wait s, run s, segments)

    def routes(self) -> list[Route]:
        return [
            Route("/druid/v2", self.post, methods=["POST"]),
            Route("/druid/v2/", self.post, methods=["POST"]),
            Route("/druid/v2/{query_id}", self.delete, methods=["DELETE"]),
        ]

    async def delete(self, request: Request) -> Response:
        self.running.cancel(request.path_params["query_id"])
        return Response(status_code=202)

    def _resolve(self, query: Query) -> tuple[list[SegmentInput], list[SegmentDescriptor]]:
        spec = query.segment_spec
        if not isinstance(spec, SegmentsSpec):
            return self.segments.inputs_for_intervals(query), []
        inputs, missing = [], []
        for descriptor in spec.descriptors:
            found = self.segments.input_for_descriptor(query.data_source, descriptor)
            if found is None:
                missing.append(descriptor)
            else:
                inputs.append(found)
        return inputs, missing

    def _execute(
        self, query: Query, inputs: Sequence[SegmentInput], entry: _Running, arrow: bool, submitted: float
    ) -> Any:
        if entry.cancelled.is_set():
            raise QueryCancelled(f"Query [{entry.query_id}] was cancelled")
        began = time.monotonic()
        conn = connection()
        entry.conn = conn
        try:
            if arrow and (whole := whole_scan_schema(query, inputs)) is not None:
                return _ipc_stream(whole, whole_scan_batches(whole, inputs, WHOLE_SCAN_BATCH_ROWS), entry)
            if arrow:  # a broker: partials it can cache and merge
                return partials_stream(run_for_broker(query, inputs))
            merged = run_merged(query, inputs)
        except duckdb.OutOfMemoryException:
            raise engine_limits().exceeded(f"Query [{entry.query_id}] on data node {self.host}") from None
        except (duckdb.InternalException, duckdb.FatalException):
            discard_connection()  # its database is invalidated: this worker's next query opens another
            raise
        finally:
            entry.conn = None
            if self.on_segments is not None and inputs:
                self.on_segments(began - submitted, time.monotonic() - began, len(inputs))
        return query.finalize(merged)

    def _from_footers(self, query: Query, inputs: Sequence[SegmentInput]) -> bytes | None:
        """A broker's partials answered from parsed footers, on the event loop: the hop to the pool
        and back (two wake-ups) cost more than the answer on a busy machine. None: run the query."""
        began = time.monotonic()
        table = broker_partials_from_footers(query, inputs)
        if table is None:
            return None
        if self.on_segments is not None:
            self.on_segments(0.0, time.monotonic() - began, len(inputs))
        return encode_partials(table)

    async def post(self, request: Request) -> Response:
        started = time.monotonic()
        pretty = "pretty" in request.query_params
        query_id, data_source, query_type = "", "", "invalid"
        headers: dict[str, str] = {}
        try:
            body = await request.body()
            if len(body) > LARGE_BODY_BYTES:  # seconds of parsing (a million-value IN) must not hold the loop
                query = await asyncio.to_thread(_parse, body)
            else:
                query = _parse(body)
            require_table_source(query)
            query_id, data_source, query_type = query.context.query_id, query.data_source, query.query_type
            if LOOKUP_FINGERPRINTS in query.context.raw:
                await check_fingerprints(query.context.raw[LOOKUP_FINGERPRINTS], query_lookups(query))
            headers[QUERY_ID_HEADER] = query_id
            inputs, missing = self._resolve(query)
            headers[RESPONSE_CONTEXT_HEADER] = missing_segments_context(missing)
            arrow = wants_arrow(request.headers.get("accept"))
            if arrow and (quick := self._from_footers(query, inputs)) is not None:
                self._record(query.data_source, query.query_type, started, 200)
                return Response(quick, media_type=ARROW_STREAM, headers=headers)
            entry = self.running.start(query_id)
            try:
                loop = asyncio.get_running_loop()
                submitted = time.monotonic()
                pool = self.pool if self.pools is None else self.pools.for_priority(query.context.priority)
                work = loop.run_in_executor(pool, self._execute, query, inputs, entry, arrow, submitted)
                timeout = query.context.timeout_ms / 1000 if query.context.timeout_ms else None
                try:
                    result = await asyncio.wait_for(asyncio.shield(work), timeout)
                except TimeoutError:
                    self.running.cancel(query_id)
                    raise QueryTimeout(
                        f"Query [{query_id}] timed out after {query.context.timeout_ms} ms"
                    ) from None
            finally:
                self.running.finish(entry)
            self._record(query.data_source, query.query_type, started, 200)
            if arrow:
                return Response(result, media_type=ARROW_STREAM, headers=headers)
            return json_response(result, 200, pretty=pretty, headers=headers)
        except QueryError as e:
            self._record(data_source, query_type, started, e.status)
            if e.status >= 500:
                log.warning("query %s failed: %s", query_id or "?", e.error_message)
            return json_response(e.to_body(self.host), e.status, pretty=pretty, headers=headers)
        except Exception as e:  # never a bare 500 with a stack trace, nor an engine's own error
            if isinstance(e, duckdb.InterruptException):
                err: QueryError = QueryCancelled(f"Query [{query_id}] was cancelled")
            else:
                err = query_engine_error(e, self.host)
                if unforeseen(err):
                    log.exception("query %s failed unexpectedly", query_id or "?")
            self._record(data_source, query_type, started, err.status)
            return json_response(err.to_body(self.host), err.status, pretty=pretty, headers=headers)

    def _record(self, data_source: str, query_type: str, started: float, status: int) -> None:
        if self.on_query is not None:
            self.on_query(data_source, query_type, time.monotonic() - started, status)


def _parse(body: bytes) -> Query:
    return parse_query(decode_query_body(body, MAX_REQUEST_BYTES))


def _ipc_stream(schema: pa.Schema, batches: Iterable[pa.RecordBatch], entry: _Running) -> memoryview:
    """The batches as one Arrow IPC stream, handed to the response without a copy to `bytes`;
    a cancel (or the query's timeout) stops it between batches, as DuckDB's interrupt would."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, schema) as writer:
        for batch in batches:
            if entry.cancelled.is_set():
                raise QueryCancelled(f"Query [{entry.query_id}] was cancelled")
            writer.write_batch(batch)
    return memoryview(sink.getvalue())
