"""Druid's SQL API on the broker: POST /druid/v2/sql[/] and DELETE /druid/v2/sql/{sqlQueryId}.

Statements are planned by `strata.sql` and their native queries run through the broker's own
runner (routing, caching, limits), against the columns `broker_service.sql_catalog` keeps.
"""

from __future__ import annotations

import asyncio
import logging
import re
import urllib.parse
import uuid
from collections.abc import AsyncIterator
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from broker_service.access import QueryOwners, authorize_sql
from broker_service.broker import Broker
from broker_service.sql_catalog import BrokerCatalog, CatalogSnapshot
from broker_service.sql_planning import LARGE_STATEMENT_CHARS, PlanningPools
from strata.query.base import Query, parse_query
from strata.query.errors import InvalidInput, QueryCancelled, QueryError, ResourceLimitExceeded, invalid
from strata.query.request_body import check_nesting
from strata.server.json_response import json_response
from strata.sql import RESULT_FORMATS, PlannedStatement, encode_rows, plan_parsed, plan_statement
from strata.sql.composed import DeferredPlan, Plan, broker_parts, natives
from strata.sql.engine_errors import engine_error
from strata.sql.formats import RowEncoder
from strata.sql.guard import check_body, check_statement
from strata.sql.guard import query_id as guarded_query_id
from strata.sql.parameters import bind
from strata.sql.plan import Output, SqlPlan
from strata.sql.scan_chunks import chunk_query, scan_chunks

log = logging.getLogger(__name__)


async def _bounded_body(request: Request, max_bytes: int) -> bytes:
    """The body, refused past `max_bytes` without holding it (the rest is read and dropped, so the
    client gets the 400 rather than a connection reset)."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size <= max_bytes:
            chunks.append(chunk)
    if size > max_bytes:
        raise ResourceLimitExceeded(
            f"SQL request of {size} bytes is larger than the limit of {max_bytes} bytes"
        )
    return b"".join(chunks)


_SYSTEM_TABLE = re.compile(r"\b(?:sys|information_schema)\s*\.", re.IGNORECASE)


async def read_body(request: Request, max_bytes: int) -> dict[str, Any]:
    raw = await _bounded_body(request, max_bytes)
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if len(raw) > 65536:  # decoding and checking a large body must not hold the event loop
        return await asyncio.to_thread(_decode_body, raw, kind)
    return _decode_body(raw, kind)


def _decode_body(raw: bytes, kind: str) -> dict[str, Any]:
    if kind in ("text/plain", "application/x-www-form-urlencoded"):
        text = raw.decode("utf-8", "replace")
        return {"query": urllib.parse.unquote_plus(text) if kind.endswith("urlencoded") else text}
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        raise invalid("Request body is not valid JSON: %s", e) from None
    if isinstance(body, (dict, list)):
        check_nesting(body)
    return check_body(body)


def _prepare_and_plan(
    query: str, parameters: Any, catalog: CatalogSnapshot, context: dict[str, Any]
) -> tuple[str, PlannedStatement | QueryError | None, list[str]]:
    """The statement with its parameters bound, checked by `strata.sql.guard` before anything
    parses it, then planned if the catalog knows the columns of every datasource it reads: all of
    planning in one trip to a worker thread."""
    sql = bind(query, parameters)
    check_statement(sql)
    return (sql, *plan_parsed(sql, catalog, context))


async def _parse_native(native: dict[str, Any]) -> Query:
    """A large native query (a statement's long IN list) is parsed in a worker thread: a 90,000-value
    filter takes the best part of a second to parse, which on the event loop would stall every client."""
    if len(orjson.dumps(native)) > LARGE_STATEMENT_CHARS:
        return await asyncio.to_thread(parse_query, native)
    return parse_query(native)


class SqlApi:
    """One broker's SQL state: the planner's catalog and the recently cancelled SQL query ids."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.catalog = BrokerCatalog(broker)
        self.cancelled: dict[str, None] = {}  # recently cancelled SQL query ids, oldest first
        self.planning = PlanningPools()  # statements parse and plan off the event loop

    async def plan(self, body: dict[str, Any], context: dict[str, Any]) -> PlannedStatement:
        """Plan a request's statement off the event loop, bounded in size and time. The catalog is
        snapshotted on the loop; a datasource whose columns are not known yet is read, then the
        statement planned again (only a datasource's first statement pays that)."""
        query = body["query"]
        planning = self.planning.budget(query)
        # INFORMATION_SCHEMA.COLUMNS lists every datasource's columns, not only those a statement names
        system = _SYSTEM_TABLE.search(query) is not None
        if system:
            await self.catalog.load(self.catalog.tables())
        snapshot = self.catalog.snapshot(system=system)
        parameters = body.get("parameters")
        sql, statement, tables = await planning.run(_prepare_and_plan, query, parameters, snapshot, context)
        await self.catalog.load(tables)  # reads unknown columns now; refreshes stale ones behind
        if isinstance(statement, QueryError):
            raise statement
        if statement is None:
            snapshot = self.catalog.snapshot(system=system)
            statement = await planning.run(plan_statement, sql, snapshot, context)
        return statement

    async def run_native(self, native: dict[str, Any], query_id: str) -> list[Any]:
        if query_id in self.cancelled:
            raise QueryCancelled(f"Query [{query_id}] was cancelled")
        query = await _parse_native(native)
        async with self.broker.admission.admit():
            result = await self.broker.runner.run(query)
        return result.results if result.results is not None else orjson.loads(result.body or b"[]")

    async def stream_scan(
        self, plan: SqlPlan, query_id: str, encoding: dict[str, Any], headers: dict[str, str]
    ) -> Response:
        """A selection answered chunk by chunk (see `strata.sql.scan_chunks`); the first chunk
        runs before the response starts, so its errors still get their status code."""
        native = plan.native
        assert native is not None
        chunks = scan_chunks(
            native["intervals"],
            self.catalog.segment_intervals(native["dataSource"]),
            descending=native.get("order") == "descending",
        )
        encoder = RowEncoder(
            [o.name for o in plan.outputs],
            [o.druid_type for o in plan.outputs],
            [o.sql_type for o in plan.outputs],
            **encoding,
        )
        skip, left = int(native.get("offset") or 0), native.get("limit")

        async def chunk_rows(intervals: list[str]) -> list[list[Any]]:
            nonlocal skip, left
            wanted = None if left is None else left + skip
            rows = plan.rows(await self.run_native(chunk_query(native, intervals, wanted), query_id))
            if skip:
                dropped = min(skip, len(rows))
                rows, skip = rows[dropped:], skip - dropped
            if left is not None:
                rows = rows[:left]
                left -= len(rows)
            return rows

        first = await chunk_rows(chunks[0]) if chunks else []

        async def body() -> AsyncIterator[bytes]:
            yield encoder.start() + encoder.rows(first)
            for intervals in chunks[1:]:
                if left == 0:
                    break
                yield encoder.rows(await chunk_rows(intervals))
            yield encoder.end()

        return StreamingResponse(body(), 200, headers=headers, media_type=encoder.media_type)

    async def run_plan(self, plan: Plan, query_id: str) -> tuple[list[list[Any]], list[Output]]:
        """Rows and output columns of a plan: native queries through the broker's runner, the
        broker-side part of composed plans with DuckDB in a worker thread."""
        if isinstance(plan, SqlPlan):
            results = [] if plan.native is None else await self.run_native(plan.native, query_id)
            return plan.rows(results), plan.outputs
        inputs = [await self.run_plan(stage.plan, query_id) for stage in plan.stages]
        if isinstance(plan, DeferredPlan):
            return await self.run_plan(plan.build([rows for rows, _ in inputs]), query_id)
        rows = await asyncio.to_thread(plan.finish, inputs)
        return rows, plan.outputs


def _sql(request: Request) -> SqlApi:
    api: SqlApi = request.app.state.sql_api
    return api


async def post_sql(request: Request) -> Response:
    api = _sql(request)
    host = api.broker.settings.host
    headers = {"X-Druid-SQL-Query-Id": str(uuid.uuid4())}
    request.state.sql_error_headers = headers  # errors are rendered by sql_error, with these headers
    try:
        body = await read_body(request, api.broker.settings.max_request_bytes)
        await authorize_sql(request, body)  # READ on every table it reads (a no-op with security off)
        context = dict(body.get("context") or {})
        query_id = guarded_query_id(context, headers["X-Druid-SQL-Query-Id"])  # goes back in a header
        headers["X-Druid-SQL-Query-Id"] = query_id
        fmt = body.get("resultFormat") or "object"
        if fmt not in RESULT_FORMATS:
            raise invalid("Unknown resultFormat [%s]; one of %s", fmt, ", ".join(RESULT_FORMATS))
        statement = await api.plan(body, {**context, "queryId": query_id})
        plan = statement.plan
        encoding: dict[str, Any] = {
            "fmt": fmt,
            "header": bool(body.get("header")),
            "types_header": bool(body.get("typesHeader")),
            "sql_types_header": bool(body.get("sqlTypesHeader")),
        }
        if encoding["header"]:
            headers["X-Druid-SQL-Header-Included"] = "yes"
        if not statement.explain and _streams(plan):
            assert isinstance(plan, SqlPlan)
            return await api.stream_scan(plan, query_id, encoding, dict(headers))
        if statement.explain:
            rows = explain_rows(plan)
            names, types, sql_types = ["PLAN", "RESOURCES", "ATTRIBUTES"], ["STRING"] * 3, ["VARCHAR"] * 3
        else:
            rows, outputs = await api.run_plan(plan, query_id)
            names = [o.name for o in outputs]
            types = [o.druid_type for o in outputs]
            sql_types = [o.sql_type for o in outputs]
        payload, media = encode_rows(rows, names, types, sql_types, **encoding)
        return Response(payload, 200, headers=dict(headers), media_type=media)
    except QueryError:
        raise
    except Exception as e:  # never a stack trace, nor another engine's error, to the client
        raise engine_error(e, host) from e


async def cancel_sql(request: Request) -> Response:
    api = _sql(request)
    query_id = request.path_params["query_id"]
    QueryOwners.check_cancel(request, query_id)
    found = api.broker.runner.cancel(query_id)
    if found:  # later stages of a statement planned in several steps must not start
        api.cancelled[query_id] = None
        while len(api.cancelled) > 10_000:
            api.cancelled.pop(next(iter(api.cancelled)))
    return Response(status_code=202 if found else 404)


SQL_ROUTES = [
    Route("/druid/v2/sql", post_sql, methods=["POST"]),
    Route("/druid/v2/sql/", post_sql, methods=["POST"]),
    Route("/druid/v2/sql/{query_id}", cancel_sql, methods=["DELETE"]),
]


def _streams(plan: Plan) -> bool:
    """Selections of rows stream; aggregations and composed statements answer at once."""
    return isinstance(plan, SqlPlan) and plan.native is not None and plan.native["queryType"] == "scan"


def explain_rows(plan: Plan) -> list[list[Any]]:
    """Druid's EXPLAIN row: PLAN (each native query with its signature), RESOURCES, ATTRIBUTES."""
    queries = natives(plan)
    outputs = plan.outputs
    explained = [
        {
            "query": native,
            "signature": [{"name": o.source, "type": o.druid_type} for o in outputs],
            "columnMappings": [{"queryColumn": o.source, "outputColumn": o.name} for o in outputs],
        }
        for native in queries
    ]
    explained += [{"broker": part} for part in broker_parts(plan)]
    resources = sorted({str(q.get("dataSource")) for q in queries})
    return [
        [
            orjson.dumps(explained).decode(),
            orjson.dumps([{"name": r, "type": "DATASOURCE"} for r in resources]).decode(),
            orjson.dumps({"statementType": "SELECT"}).decode(),
        ]
    ]


def sql_error(err: QueryError, host: str, headers: dict[str, str]) -> Response:
    """Druid's SQL error body: the native one with `sourceType: sql`, unsupported as Druid says it."""
    body = err.to_body(host)
    body["context"] = {**body.get("context", {}), "sourceType": "sql"}
    if not isinstance(err, InvalidInput) and err.status == 501:
        body.update(error="druidException", errorCode="unsupported", persona="USER", category="UNSUPPORTED")
    return json_response(body, err.status, headers=headers)
