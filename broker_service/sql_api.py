"""Druid's SQL API on the broker: POST /druid/v2/sql[/] and DELETE /druid/v2/sql/{sqlQueryId}.

Statements are planned by `strata.sql` against the columns `broker_service.sql_catalog` keeps, and
run by broker_service.sql_execution within the bounds broker_service.sql_statements keeps (the
deadline of their `timeout`, their subqueries' allowance); a cancel stops one wherever it is.
"""

from __future__ import annotations

import asyncio
import logging
import re
import urllib.parse
import uuid
from contextlib import AsyncExitStack
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from broker_service.access import QueryOwners, authorize_sql
from broker_service.admission import Admission
from broker_service.broker import Broker
from broker_service.laning import scheduling_keys
from broker_service.sql_catalog import BrokerCatalog, CatalogSnapshot
from broker_service.sql_execution import StatementExecution, StatementResponse
from broker_service.sql_planning import PlanningPools
from broker_service.sql_statements import RunningStatement, Statements
from strata.query.base import parse_query
from strata.query.context import timeout_within
from strata.query.data_source import parse_data_source, tables_read
from strata.query.engine_errors import unforeseen
from strata.query.errors import InvalidInput, QueryError, ResourceLimitExceeded, invalid
from strata.query.request_body import check_nesting
from strata.server.json_response import json_response
from strata.sql import RESULT_FORMATS, PlannedStatement, encode_rows, plan_parsed, plan_statement
from strata.sql.composed import Plan, broker_parts, natives
from strata.sql.engine_errors import engine_error
from strata.sql.guard import check_body, check_statement
from strata.sql.guard import query_id as guarded_query_id
from strata.sql.parameters import bind
from strata.sql.subquery_limits import ROWS_KEY, SubqueryLimits
from strata.wire import SQL_QUERY_ID_HEADER

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


LARGE_BODY_BYTES = 65536
_SYSTEM_TABLE = re.compile(r"\b(?:sys|information_schema)\s*\.", re.IGNORECASE)
# SET statements come before the statement they set (Druid's order; anything else fails to plan), so
# a statement has some when its first word after blanks and comments is SET. Atomic groups: a long
# comment or run of blanks is passed once, never tried again in other splits.
_LEADING_SET = re.compile(r"(?>\s|--[^\n]*|/\*.*?\*/)*+SET\b", re.IGNORECASE | re.DOTALL)


def refuse_before_planning(admission: Admission, sql: str, context: dict[str, Any]) -> None:
    """The 429 a statement would meet at admission, before it is planned: under a flood of heavy
    statements retried at once, planning each only to refuse it would take the broker's CPU from
    the queries it runs. A statement whose SET statements may change its lane, or whose context
    keys are wrong (told after planning, as before), is planned first."""
    if _LEADING_SET.match(sql):
        return
    try:
        priority, lane = scheduling_keys(context)
    except QueryError:
        return
    admission.check(priority=priority, lane=lane)


def statement_head(body: dict[str, Any], default_id: str) -> tuple[dict[str, Any], str, str]:
    """A checked request body's context, statement id (`sqlQueryId` if it fits a header, else
    `default_id`) and result format; Druid's 400 for an id or a format it cannot take."""
    context = dict(body.get("context") or {})
    query_id = guarded_query_id(context, default_id)  # goes back in a header
    fmt = body.get("resultFormat") or "object"
    if fmt not in RESULT_FORMATS:
        raise invalid("Unknown resultFormat [%s]; one of %s", fmt, ", ".join(RESULT_FORMATS))
    return context, query_id, fmt


async def read_body(request: Request, max_bytes: int) -> dict[str, Any]:
    raw = await _bounded_body(request, max_bytes)
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if len(raw) > LARGE_BODY_BYTES:  # decoding and checking a large body must not hold the event loop
        return await asyncio.to_thread(decode_body, raw, kind)
    return decode_body(raw, kind)


def decode_body(raw: bytes, kind: str) -> dict[str, Any]:
    """A request body of content type `kind` as a checked SQL request (Druid's 400 otherwise)."""
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


class SqlApi:
    """One broker's SQL state: the planner's catalog, the statements running, how they run."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.catalog = BrokerCatalog(broker)
        self.statements = Statements()
        self.execution = StatementExecution(broker, self.catalog)
        self.planning = PlanningPools()  # statements parse and plan off the event loop

    def start(self, query_id: str, context: dict[str, Any]) -> RunningStatement:
        """A statement registered under its id, its deadline running from now."""
        return self.statements.start(query_id, *self.bounds(context))

    def bounds(self, context: dict[str, Any]) -> tuple[int, SubqueryLimits]:
        """A statement's timeout (the context's under the broker's default and maximum) and its
        subquery allowance (the context's under the broker's limits); Druid's 400 for values it
        cannot take. The broker's default maxSubqueryRows goes into the context, for the planner."""
        settings = self.broker.settings
        runner = settings.limits
        timeout_ms = timeout_within(context, runner.default_timeout_ms, runner.max_timeout_ms)
        context.setdefault(ROWS_KEY, settings.max_subquery_rows)
        return timeout_ms, SubqueryLimits.of(context, settings.subquery_bytes_ceiling)

    async def plan(self, body: dict[str, Any], context: dict[str, Any]) -> PlannedStatement:
        """Plan a request's statement off the event loop, bounded in size and time. The catalog is
        snapshotted on the loop; a datasource whose columns are not known yet is read, then the
        statement planned again (only a datasource's first statement pays that)."""
        query = body["query"]
        planning = self.planning.budget(query, _planning_priority(context))
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


def _planning_priority(context: dict[str, Any]) -> int:
    """The priority a statement plans at: its request context's (SET statements may change the one
    it runs at); a malformed one is told after planning, as before."""
    try:
        return scheduling_keys(context)[0]
    except QueryError:
        return 0


def _flag(value: Any, *, default: bool) -> bool:
    """A boolean context parameter given as a boolean or a string."""
    if value is None:
        return default
    return value if isinstance(value, bool) else str(value).lower() == "true"


def _sql(request: Request) -> SqlApi:
    api: SqlApi = request.app.state.sql_api
    return api


async def post_sql(request: Request) -> Response:
    api = _sql(request)
    host = api.broker.settings.host
    headers = {SQL_QUERY_ID_HEADER: str(uuid.uuid4())}
    request.state.sql_error_headers = headers  # errors are rendered by sql_error, with these headers
    statement: RunningStatement | None = None
    try:
        body = await read_body(request, api.broker.settings.max_request_bytes)
        await authorize_sql(request, body)  # READ on every table it reads (a no-op with security off)
        context, query_id, fmt = statement_head(body, headers[SQL_QUERY_ID_HEADER])
        headers[SQL_QUERY_ID_HEADER] = query_id
        refuse_before_planning(api.broker.admission, body["query"], context)
        statement = api.start(query_id, context)
        planned = await statement.bounded(api.plan(body, {**context, "queryId": query_id}))
        statement.settle(*api.bounds(dict(planned.context)))  # SET statements may have changed them
        encoding: dict[str, Any] = {
            "fmt": fmt,
            "header": bool(body.get("header")),
            "types_header": bool(body.get("typesHeader")),
            "sql_types_header": bool(body.get("sqlTypesHeader")),
            "stringify_arrays": _flag(context.get("sqlStringifyArrays"), default=True),
        }
        if encoding["header"]:
            headers["X-Druid-SQL-Header-Included"] = "yes"
        if planned.explain:
            names, types, sql_types = ["PLAN", "RESOURCES", "ATTRIBUTES"], ["STRING"] * 3, ["VARCHAR"] * 3
            payload, media = encode_rows(explain_rows(planned.plan), names, types, sql_types, **encoding)
            return Response(payload, 200, headers=dict(headers), media_type=media)
        return await _answer_admitted(api, planned, statement, encoding, dict(headers))
    except QueryError:
        raise
    except Exception as e:  # never a stack trace, nor another engine's error, to the client
        err = engine_error(e, host)
        if unforeseen(err):
            log.exception("unexpected failure answering a SQL statement")
        raise err from e
    finally:
        if statement is not None and not statement.streaming:
            statement.finish()


async def _answer_admitted(
    api: SqlApi,
    planned: PlannedStatement,
    statement: RunningStatement,
    encoding: dict[str, Any],
    headers: dict[str, str],
) -> Response:
    """The statement's answer under one admission slot for all of it (its native queries and the
    broker's relational stage), in its context's lane; a streamed answer holds the slot until its
    last byte is sent."""
    priority, lane = scheduling_keys(planned.context)
    statement.priority = priority
    admitted = AsyncExitStack()
    await admitted.enter_async_context(api.broker.admission.admit(priority=priority, lane=lane))
    try:
        response = await api.execution.answer(planned.plan, statement, encoding, headers)
    except BaseException:
        await admitted.aclose()
        raise
    if isinstance(response, StatementResponse):
        response.hold(admitted)
    else:
        await admitted.aclose()
    return response


async def cancel_sql(request: Request) -> Response:
    api = _sql(request)
    query_id = request.path_params["query_id"]
    QueryOwners.check_cancel(request, query_id)
    found = api.statements.cancel(query_id)
    return Response(status_code=202 if found else 404)


SQL_ROUTES = [
    Route("/druid/v2/sql", post_sql, methods=["POST"]),
    Route("/druid/v2/sql/", post_sql, methods=["POST"]),
    Route("/druid/v2/sql/{query_id}", cancel_sql, methods=["DELETE"]),
]


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
    resources = sorted(
        {t for q in queries for t in tables_read(parse_data_source(q["dataSource"], parse_query))}
    )
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
