"""Running a planned SQL statement on the broker within its bounds, and answering it.

Native stages go through the broker's runner (routing, caching, admission), each with the time the
statement has left; what they hand the broker for a join, a window or an outer query counts
against the statement's subquery allowance (`strata.sql.subquery_limits`) before it is decoded.
The relational part runs in a slot of the broker's engine (broker_service.relational_engine) and
its answer streams out one Arrow batch at a time; so do plain selections (`strata.sql.scan_chunks`).
The first batch is read before the response starts, so its errors still get their status code; a
failure later (a timeout, a cancel, the engine's memory) ends the body early, without its closing
bracket or final newline, as Druid truncates a response that fails midway.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack
from typing import Any

import orjson
import pyarrow as pa
from starlette.responses import Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from broker_service.broker import Broker
from broker_service.paced_answers import paced_answer
from broker_service.query_runner import QueryResult
from broker_service.relational_engine import EngineSlot
from broker_service.sql_catalog import BrokerCatalog
from broker_service.sql_planning import LARGE_STATEMENT_CHARS
from broker_service.sql_statements import RunningStatement
from strata.query.base import Query, parse_query
from strata.query.collector import collector_paused
from strata.query.data_source import parse_data_source, routing_table
from strata.query.errors import QueryCancelled, QueryError
from strata.query.scan import ScanQuery
from strata.server.priority_threads import run_for_priority
from strata.sql import encode_rows
from strata.sql.arrow_answer import SqlAnswer, sql_answer
from strata.sql.composed import ComposedPlan, DeferredPlan, Plan
from strata.sql.formats import RowEncoder
from strata.sql.plan import Output, SqlPlan
from strata.sql.sandbox import ResultBatches, Rows
from strata.sql.scan_chunks import chunk_query, scan_chunks
from strata.sql.stage_tables import stage_table, takes_table

log = logging.getLogger(__name__)

BACKSTOP_GRACE_S = 1.0
# past these, an answer is made into rows, or rows are encoded, on a worker thread, not the loop
ROWS_ON_LOOP_BYTES = 64 * 1024
ROWS_ENCODED_ON_LOOP = 1000


async def _parse_native(native: dict[str, Any], priority: int) -> Query:
    """A large native query (a statement's long IN list) is parsed in a worker thread: a 90,000-value
    filter takes the best part of a second to parse, which on the event loop would stall every client."""
    if len(orjson.dumps(native)) > LARGE_STATEMENT_CHARS:
        return await run_for_priority(priority, parse_query, native)
    return parse_query(native)


class StatementResponse(StreamingResponse):
    """A streamed answer that lets go of its statement (registry entry, engine slot) once sent,
    also when the client leaves before its body is read, and at the statement's deadline however
    slowly the client reads (a client that stops reading would otherwise hold an engine slot)."""

    def __init__(
        self,
        body: AsyncIterator[bytes],
        statement: RunningStatement,
        on_close: Callable[[], None],
        **kwargs: Any,
    ) -> None:
        super().__init__(body, **kwargs)
        self._statement = statement
        self._on_close: Callable[[], None] | None = on_close
        self._admitted: AsyncExitStack | None = None

    def hold(self, admitted: AsyncExitStack) -> None:
        """Keep the statement's admission slot until the answer is sent (or cut short)."""
        self._admitted = admitted

    def close(self) -> None:
        on_close, self._on_close = self._on_close, None
        if on_close is not None:
            on_close()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        deadline = self._statement.deadline
        # a backstop for a client that stopped reading: the statement's own deadline ends the body
        # first, cleanly (the last chunk sent, only the closing bracket missing)
        backstop = None if deadline is None else deadline + BACKSTOP_GRACE_S
        try:
            async with asyncio.timeout_at(backstop):
                await super().__call__(scope, receive, send)
        except TimeoutError:  # the body is cut short, as for any failure after the status
            log.info(
                "SQL query %s: its answer was still being sent at its deadline", self._statement.query_id
            )
        finally:
            self.close()
            if self._admitted is not None:
                await self._admitted.aclose()


class StatementExecution:
    def __init__(self, broker: Broker, catalog: BrokerCatalog) -> None:
        self.broker = broker
        self.catalog = catalog

    async def native_rows(self, plan: SqlPlan, statement: RunningStatement, *, subquery: bool) -> Rows:
        """The rows of a plan's native stage, sent with the time the statement has left; a
        subquery's answer is counted in bytes before it is decoded."""
        if plan.native is None:
            return plan.rows([])
        _, result = await self._native_result(plan.native, statement)
        return await self._decoded(plan, result, statement, subquery=subquery)

    async def stage_input(self, plan: SqlPlan, statement: RunningStatement) -> Rows | pa.Table:
        """A stage the broker's engine reads: a scan's merged partials as an Arrow table where its
        columns allow (strata.sql.stage_tables), never made into rows and back; else its rows.
        Counted against the statement's allowance as `rows` counts them."""
        if plan.native is None or not takes_table(plan):
            return (await self.rows(plan, statement))[0]
        query, result = await self._native_result(plan.native, statement, as_table=True)
        if result.table is None:  # answered whole from the result-level cache
            rows: Rows | pa.Table = await self._decoded(plan, result, statement, subquery=True)
        else:
            assert isinstance(query, ScanQuery)
            made = run_for_priority(statement.priority, _table_of, plan, query, result.table)
            rows, nbytes = await statement.bounded(made)
            statement.limits.add_bytes(nbytes)
        statement.limits.add(len(rows), 0)
        return rows

    async def _native_result(
        self,
        native: dict[str, Any],
        statement: RunningStatement,
        *,
        as_table: bool = False,
        sql: SqlAnswer | None = None,
    ) -> tuple[Query, QueryResult]:
        """A native stage's query run with the time the statement has left (`sql`: the statement's
        body, written from the merged columns where the runner may)."""
        left = statement.time_left_ms()
        if left is not None:
            native = {**native, "context": {**(native.get("context") or {}), "timeout": left}}
        query = await _parse_native(native, statement.priority)
        # no admission here: the statement holds one slot for all its stages (sql_api)
        return query, await statement.bounded(self.broker.runner.run(query, as_table=as_table, sql=sql))

    async def _decoded(
        self, plan: SqlPlan, result: QueryResult, statement: RunningStatement, *, subquery: bool
    ) -> Rows:
        """A native answer's rows. A large answer is decoded and made into rows on a worker thread:
        40,000 scan rows are ~150 ms of Python, which on the event loop would hold every other query
        that long; a thread gives the interpreter back to the loop every switch interval (a
        low-priority statement's at a raised nice value)."""
        if subquery:
            statement.limits.add_bytes(len(result.body or b""))
        if result.body is not None and len(result.body) <= ROWS_ON_LOOP_BYTES:
            return _rows_of(plan, result.results, result.body)
        made = run_for_priority(statement.priority, _rows_of, plan, result.results, result.body)
        return await statement.bounded(made)

    async def rows(self, plan: Plan, statement: RunningStatement) -> tuple[Rows, list[Output]]:
        """The rows of a plan a statement reads as a subquery: counted against its allowance."""
        if isinstance(plan, SqlPlan):
            rows = await self.native_rows(plan, statement, subquery=True)
            statement.limits.add(len(rows), 0)
            return rows, plan.outputs
        if isinstance(plan, DeferredPlan):
            return await self.rows(await self._built(plan, statement), statement)
        inputs = await self._inputs(plan, statement)  # before the slot: a stage may need one itself
        slot = await self._acquire(statement)
        try:
            batches = await self._start(plan, inputs, slot, statement)
            rows = await statement.bounded(slot.run(_collect, batches, statement))
        finally:
            self._release(slot, statement)
        return rows, plan.outputs

    async def answer(
        self, plan: Plan, statement: RunningStatement, encoding: dict[str, Any], headers: dict[str, str]
    ) -> Response:
        """The statement's response: streamed for selections and relational answers, whole otherwise."""
        while isinstance(plan, DeferredPlan):
            plan = await self._built(plan, statement)
        if isinstance(plan, ComposedPlan):
            return await self._stream_composed(plan, statement, encoding, headers)
        if plan.native is not None and plan.native["queryType"] == "scan":
            return await self._stream_scan(plan, statement, encoding, headers)
        quiet = self.broker.admission.cheap_lane_quiet
        writer = sql_answer(plan, encoding)
        if writer is None:
            rows = await self.native_rows(plan, statement, subquery=False)
        else:  # the body written from the merged columns where the runner may, else as the rest
            assert plan.native is not None
            _, result = await self._native_result(plan.native, statement, sql=writer)
            if result.sql_body is not None:
                media = writer.media_type
                return paced_answer(
                    result.sql_body, statement.priority, quiet, headers=headers, media_type=media
                )
            rows = await self._decoded(plan, result, statement, subquery=False)
        encoded = functools.partial(_encoded_whole, rows, *_columns(plan.outputs), **encoding)
        on_loop = len(rows) <= ROWS_ENCODED_ON_LOOP
        payload, media = encoded() if on_loop else await run_for_priority(statement.priority, encoded)
        return paced_answer(payload, statement.priority, quiet, headers=headers, media_type=media)

    async def _built(self, plan: DeferredPlan, statement: RunningStatement) -> Plan:
        return plan.build([(await self.rows(stage.plan, statement))[0] for stage in plan.stages])

    async def _inputs(
        self, plan: ComposedPlan, statement: RunningStatement
    ) -> list[tuple[Rows | pa.Table, list[Output]]]:
        """The stages' rows (or tables), one stage after another (a statement holds at most one
        engine slot at a time, so statements waiting for slots can never hold all of them)."""
        inputs: list[tuple[Rows | pa.Table, list[Output]]] = []
        for stage in plan.stages:
            plan_ = stage.plan
            if isinstance(plan_, SqlPlan):
                inputs.append((await self.stage_input(plan_, statement), plan_.outputs))
            else:
                inputs.append(await self.rows(plan_, statement))
        return inputs

    async def _acquire(self, statement: RunningStatement) -> EngineSlot:
        """A slot of the broker's engine, waited for within the statement's deadline; known to the
        statement while it holds it, so a cancel interrupts its work."""
        engine = self.broker.relational.for_priority(statement.priority)
        slot = await statement.bounded(engine.acquire(), lost=engine.release)
        statement.slot = slot
        return slot

    def _release(self, slot: EngineSlot, statement: RunningStatement) -> None:
        statement.slot = None
        slot.engine.release(slot)

    async def _start(
        self,
        plan: ComposedPlan,
        inputs: list[tuple[Rows | pa.Table, list[Output]]],
        slot: EngineSlot,
        statement: RunningStatement,
    ) -> ResultBatches:
        batches = await statement.bounded(slot.run(lambda: plan.start(slot.cursor(), inputs)))
        slot.on_release(batches.close)
        return batches

    async def _stream_composed(
        self,
        plan: ComposedPlan,
        statement: RunningStatement,
        encoding: dict[str, Any],
        headers: dict[str, str],
    ) -> Response:
        inputs = await self._inputs(plan, statement)
        slot = await self._acquire(statement)
        try:
            batches = await self._start(plan, inputs, slot, statement)
            encoder = RowEncoder(*_columns(plan.outputs), **encoding)
            head = encoder.start()  # before any rows: it tells the encoder whether a comma leads them
            first = await statement.bounded(slot.run(_encoded, batches, encoder))
        except BaseException:
            self._release(slot, statement)
            raise

        async def chunks() -> AsyncIterator[bytes]:
            yield head + (first or b"")
            if first is None:
                return
            while (chunk := await statement.bounded(slot.run(_encoded, batches, encoder))) is not None:
                yield chunk

        return self._streamed(statement, chunks(), encoder, headers, lambda: self._release(slot, statement))

    async def _stream_scan(
        self, plan: SqlPlan, statement: RunningStatement, encoding: dict[str, Any], headers: dict[str, str]
    ) -> Response:
        """A selection answered chunk by chunk (see `strata.sql.scan_chunks`)."""
        native = plan.native
        assert native is not None
        table = routing_table(parse_data_source(native["dataSource"], parse_query))
        chunks = (
            scan_chunks(
                native["intervals"],
                self.catalog.segment_intervals(table),
                descending=native.get("order") == "descending",
            )
            if table
            else [native["intervals"]]  # an inline or union dataSource: one piece
        )
        encoder = RowEncoder(*_columns(plan.outputs), **encoding)
        skip, left = int(native.get("offset") or 0), native.get("limit")

        async def chunk_rows(intervals: list[str]) -> list[list[Any]]:
            nonlocal skip, left
            wanted = None if left is None else left + skip
            chunk = dataclasses.replace(plan, native=chunk_query(native, intervals, wanted))
            rows = await self.native_rows(chunk, statement, subquery=False)
            if skip:
                dropped = min(skip, len(rows))
                rows, skip = rows[dropped:], skip - dropped
            if left is not None:
                rows = rows[:left]
                left -= len(rows)
            return rows

        first = await chunk_rows(chunks[0]) if chunks else []

        async def encoded(rows: list[list[Any]]) -> bytes:
            return (
                encoder.rows(rows)
                if len(rows) <= ROWS_ENCODED_ON_LOOP
                else await run_for_priority(statement.priority, encoder.rows, rows)
            )

        async def body() -> AsyncIterator[bytes]:
            yield encoder.start() + await encoded(first)
            for intervals in chunks[1:]:
                if left == 0:
                    break
                yield await encoded(await chunk_rows(intervals))

        return self._streamed(statement, body(), encoder, headers, lambda: None)

    def _streamed(
        self,
        statement: RunningStatement,
        chunks: AsyncIterator[bytes],
        encoder: RowEncoder,
        headers: dict[str, str],
        release: Callable[[], None],
    ) -> Response:
        closed = False

        def close() -> None:
            nonlocal closed
            if not closed:
                closed = True
                release()
                statement.finish()

        async def body() -> AsyncIterator[bytes]:
            try:
                async for chunk in chunks:
                    yield chunk
            except QueryError as e:  # the status is sent: the body ends short, as Druid's does
                level = logging.INFO if isinstance(e, QueryCancelled) else logging.WARNING
                log.log(level, "SQL query %s stopped mid-answer: %s", statement.query_id, e.error_message)
                return
            finally:
                close()
            yield encoder.end()

        statement.streaming = True
        media = encoder.media_type
        return StatementResponse(body(), statement, close, status_code=200, headers=headers, media_type=media)


def _rows_of(plan: SqlPlan, results: list[Any] | None, body: bytes | None) -> Rows:
    """A native answer's rows for the plan, from its results or else its JSON; the collector paused
    (strata.query.collector), as millions of parsed objects and rows set off collections that each
    walk every live object."""
    with collector_paused():
        return plan.rows(results if results is not None else orjson.loads(body or b"[]"))


def _table_of(plan: SqlPlan, query: ScanQuery, merged: pa.Table) -> tuple[Rows | pa.Table, int]:
    """A scan stage's table for the broker's engine from its merged partials, or its rows as the
    JSON answer gives them where a column must take that path (strata.sql.stage_tables); and the
    bytes the subquery allowance counts: the table's (the sample's 40,000-row scan: 8.9 MB, its
    JSON 8.4 MB), or the JSON's."""
    table = stage_table(plan, query.answer_table(merged))
    if table is not None:
        return table, table.nbytes
    with collector_paused():
        body = query.finalize_json(merged)
        return plan.rows(orjson.loads(body)), len(body)


def _encoded_whole(rows: Rows, *columns: list[str], **encoding: Any) -> tuple[bytes, str]:
    """`encode_rows`, the collector paused: a row's stringified copy and its text are new objects."""
    with collector_paused():
        return encode_rows(rows, *columns, **encoding)


def _collect(batches: ResultBatches, statement: RunningStatement) -> Rows:
    """Every row of an inner statement's answer, counted against the allowance batch by batch (a
    thread's: the statement's steps run one at a time, so its allowance is never shared)."""
    rows: Rows = []
    while (batch := batches.next_batch()) is not None:
        statement.limits.add(batch.num_rows, batch.nbytes)
        rows.extend(batches.rows(batch))
    return rows


def _encoded(batches: ResultBatches, encoder: RowEncoder) -> bytes | None:
    """The next batch of the answer in the response's format; None once it is all read."""
    batch = batches.next_batch()
    return None if batch is None else encoder.rows(batches.rows(batch))


def _columns(outputs: list[Output]) -> tuple[list[str], list[str], list[str]]:
    return [o.name for o in outputs], [o.druid_type for o in outputs], [o.sql_type for o in outputs]
