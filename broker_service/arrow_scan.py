"""Scan results as one streamed Arrow IPC stream (`Accept: application/vnd.apache.arrow.stream`).

Druid answers scans in JSON, built whole; a bulk reader (the Spark data source) wants columns,
typed, with no size cap. Asked for Arrow, the broker answers an unordered scan by reading its
segments a few at a time (each through the usual scatter with replica retries) and writing each
partial as record batches as soon as it arrives, so memory stays at a few segments whatever the
answer's size. The stream's schema is fixed before the first byte: the columns asked (or every
column) typed by the segments' own column types (segmentMetadata, kept per segment), `__time` as
`timestamp[ms, UTC]`. A failure after the first byte cannot change the status any more: it ends
the stream with an empty batch whose custom metadata `strata.error` holds Druid's error body.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping, Sequence
from contextlib import AsyncExitStack, aclosing
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from broker_service.admission import HeldStream
from broker_service.broker import Broker
from broker_service.laning import scheduling_keys
from broker_service.scatter import GatherResult, Scatter
from broker_service.segment_plan import SegmentTask, plan_segments
from strata.query import QueryError
from strata.query.columns import TIME_COLUMN
from strata.query.druid_types import arrow_type
from strata.query.engine_errors import query_engine_error, unforeseen
from strata.query.errors import QueryUnsupported, SegmentsMissing
from strata.query.scan import ScanQuery
from strata.server.priority_threads import executor_for
from strata.wire import ARROW_STREAM, ERROR_METADATA_KEY

log = logging.getLogger(__name__)

TIME_TYPE = pa.timestamp("ms", tz="UTC")
SEGMENTS_PER_FETCH = 1  # a fetch holds one segment's rows in memory (per prefetch slot)
PREFETCH = 2  # fetches in flight while the previous one is written
BATCH_ROWS = 65_536  # rows per record batch sent: the client holds one batch at a time


def stream_schema(query: ScanQuery, column_types: Mapping[str, str]) -> pa.Schema:
    """`columns` (or all known ones, `__time` first), typed; a column no segment has is all-null strings."""
    names = list(query.columns) or [TIME_COLUMN, *[c for c in column_types if c != TIME_COLUMN]]
    return pa.schema(
        [
            pa.field(n, TIME_TYPE if n == TIME_COLUMN else arrow_type(column_types.get(n, "STRING")))
            for n in names
        ]
    )


def conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """A partial (with `__segment`, `__time` as epoch ms, per-request types) in the stream's schema."""
    columns = []
    for f in schema:
        if f.name not in table.column_names:
            columns.append(pa.nulls(table.num_rows, f.type))
            continue
        col = table.column(f.name)
        if pa.types.is_dictionary(col.type):
            col = col.cast(col.type.value_type)
        if f.name == TIME_COLUMN and not pa.types.is_timestamp(col.type):
            col = col.cast(pa.int64()).cast(TIME_TYPE)
        columns.append(col if col.type == f.type else pc.cast(col, f.type, safe=False))
    return pa.Table.from_arrays(columns, schema=schema)


class _Sink:
    """A file-like sink the IPC writer fills; `take()` hands over what was written since."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.closed = False

    def write(self, data: Any) -> int:
        self.parts.append(bytes(data))
        return len(data)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True

    def take(self) -> bytes:
        out = b"".join(self.parts)
        self.parts.clear()
        return out


class ArrowEncoder:
    """One IPC stream written piecewise: schema first, then batches, then the end-of-stream mark."""

    def __init__(self, schema: pa.Schema) -> None:
        self.schema = schema
        self._sink = _Sink()
        self._writer = pa.ipc.new_stream(self._sink, schema)

    def start(self) -> bytes:
        return self._sink.take()

    def table(self, table: pa.Table) -> tuple[bytes, int]:
        conformed = conform(table, self.schema)
        self._writer.write_table(conformed, max_chunksize=BATCH_ROWS)
        return self._sink.take(), conformed.num_rows

    def error(self, body: Mapping[str, Any]) -> bytes:
        empty = pa.RecordBatch.from_pylist([], schema=self.schema)
        self._writer.write_batch(empty, custom_metadata={ERROR_METADATA_KEY: orjson.dumps(body)})
        return self.finish()

    def finish(self) -> bytes:
        self._writer.close()
        return self._sink.take()


async def arrow_scan_response(broker: Broker, query: ScanQuery, headers: dict[str, str]) -> HeldStream:
    """Check what can fail with a status (order, types, planning), then stream the rest."""
    if query.order != "none":
        raise QueryUnsupported("Arrow scan results are unordered; drop [order] or ask for JSON")
    tasks = plan_segments(broker.view, query).tasks
    schema = stream_schema(query, await broker.scan_types.for_tasks(broker.runner, query, tasks))
    priority, lane = scheduling_keys(query.context.raw)
    slot = AsyncExitStack()  # admitted before the first byte, so a 429 is still a status; held to the end
    await slot.enter_async_context(broker.admission.admit(priority=priority, lane=lane))
    try:
        encoder = ArrowEncoder(schema)
        stream = _stream(broker, query, tasks, encoder)
        response = HeldStream(slot, stream, media_type=ARROW_STREAM, headers=headers)
    except BaseException:
        await slot.aclose()
        raise
    broker.metrics.segments_queried.inc(len(tasks))
    broker.metrics.streamed_segments.inc(len(tasks))
    return response


async def _stream(
    broker: Broker, query: ScanQuery, tasks: Sequence[SegmentTask], encoder: ArrowEncoder
) -> AsyncIterator[bytes]:
    loop = asyncio.get_running_loop()
    pool = executor_for(query.context.priority, broker.merge_pool)
    yield encoder.start()
    try:
        partials = _limited(_partials(broker, query, tasks), query.offset, query.limit)
        async with aclosing(partials) as tables:
            async for table in tables:
                for start in range(0, table.num_rows, BATCH_ROWS):  # bounded pieces, sent as made
                    piece = table.slice(start, BATCH_ROWS)
                    data, rows = await loop.run_in_executor(pool, encoder.table, piece)
                    broker.metrics.streamed_rows.inc(rows)
                    broker.metrics.streamed_bytes.inc(len(data))
                    yield data
    except QueryError as e:
        yield encoder.error(e.to_body(broker.settings.host))
        return
    except Exception as e:  # never a silent truncation: the client reads the error
        err = query_engine_error(e, broker.settings.host)
        if unforeseen(err):
            log.exception("unexpected failure streaming a scan")
        yield encoder.error(err.to_body(broker.settings.host))
        return
    yield encoder.finish()


async def _limited(
    tables: AsyncGenerator[pa.Table, None], offset: int, limit: int | None
) -> AsyncGenerator[pa.Table, None]:
    """Druid's scan offset and limit over the stream (unordered: rows in segment order)."""
    skip, left = offset, limit
    async with aclosing(tables) as source:
        async for table in source:
            if skip:
                dropped = min(skip, table.num_rows)
                table, skip = table.slice(dropped), skip - dropped
            if left is not None:
                table = table.slice(0, left)
                left -= table.num_rows
            if table.num_rows:
                yield table
            if left == 0:
                return


async def _partials(
    broker: Broker, query: ScanQuery, tasks: Sequence[SegmentTask]
) -> AsyncGenerator[pa.Table, None]:
    """Partials in segment order, `PREFETCH` fetches ahead; missing segments end the stream."""
    loop = asyncio.get_running_loop()
    timeout_ms = broker.runner.timeout_ms(query)
    deadline = loop.time() + timeout_ms / 1000 if timeout_ms else None
    budget = broker.runner.gather_budget(query)
    scatter = Scatter(broker.view, broker.client, on_response=_record(broker), budget=budget)

    def time_left() -> float | None:
        return None if deadline is None else max(0.001, deadline - loop.time())

    groups = [tasks[i : i + SEGMENTS_PER_FETCH] for i in range(0, len(tasks), SEGMENTS_PER_FETCH)]
    pending: list[asyncio.Task[GatherResult]] = []
    try:
        for start in range(len(groups)):
            while len(pending) < PREFETCH and start + len(pending) < len(groups):
                group = groups[start + len(pending)]
                pending.append(
                    asyncio.create_task(scatter.gather(query, group, time_left, per_segment=False))
                )
            gathered = await pending.pop(0)
            if gathered.missing:
                if gathered.last_remote_error is not None:
                    raise gathered.last_remote_error
                ids = [t.segment_id for t in gathered.missing]
                descriptors = [t.descriptor.to_json() for t in gathered.missing]
                raise SegmentsMissing.after_retries(ids, descriptors, gathered.retries)
            for table in gathered.tables:
                yield table
    finally:
        for task in pending:
            task.cancel()


def _record(broker: Broker) -> Callable[[Any, float, bool], None]:
    def on_response(server: Any, seconds: float, ok: bool) -> None:
        broker.metrics.on_node_request(server.name, seconds, ok)

    return on_response
