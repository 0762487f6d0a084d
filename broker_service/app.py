"""The broker's public HTTP API: Druid's native query endpoint, datasource info, status, metrics.

Errors always carry Druid's JSON body and status code (query.errors); nothing escapes as a stack
trace, and a failing query never takes the broker down.
"""

from __future__ import annotations

import asyncio
import logging
import resource
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import orjson
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from broker_service.access import QueryOwners, authorize_query, readable, secure_app
from broker_service.arrow_scan import arrow_scan_response
from broker_service.broker import Broker
from broker_service.cache_status import cache_status
from broker_service.console_routes import console_routes
from broker_service.coordinator_link import COORDINATOR_ROUTES, CoordinatorLink
from broker_service.datasource_info import (
    candidates,
    datasource_columns,
    datasource_columns_full,
    default_interval,
)
from broker_service.fast_path import WholeAnswerPath, remember
from broker_service.laning import scheduling_keys
from broker_service.lookup_keys import answer_version
from broker_service.paced_answers import paced_answer
from broker_service.query_runner import QueryResult
from broker_service.refusal_path import RETRY_AFTER, RefusalPath
from broker_service.response_context import encode_response_context
from broker_service.sql_api import SQL_ROUTES, SqlApi, sql_error
from broker_service.sql_task_api import SQL_TASK_ROUTES
from strata.query import Query, QueryError, parse_query
from strata.query.engine_errors import query_engine_error, unforeseen
from strata.query.errors import QueryCapacityExceeded, invalid
from strata.query.request_body import decode_query_body
from strata.query.scan import ScanQuery
from strata.query.segment_spec import parse_segment_spec
from strata.security.guard import Guard
from strata.server import __version__
from strata.server.json_response import druid_error_handlers
from strata.server.json_response import json_response as _json
from strata.wire import QUERY_ID_HEADER, RESPONSE_CONTEXT_HEADER, wants_arrow
from timeline import Interval

log = logging.getLogger(__name__)


def _answer(
    result: QueryResult, pretty: bool, headers: dict[str, str], priority: int, broker: Broker
) -> Response:
    if result.body is None or pretty:
        results = result.results if result.results is not None else orjson.loads(result.body or b"null")
        return _json(results, pretty=pretty, headers=headers)
    quiet = broker.admission.cheap_lane_quiet
    return paced_answer(result.body, priority, quiet, headers=headers, media_type="application/json")


def _now_ms() -> int:
    return int(time.time() * 1000)


def _broker(request: Request) -> Broker:
    broker: Broker = request.app.state.broker
    return broker


def _pretty(request: Request) -> bool:
    return "pretty" in request.query_params


async def post_query(request: Request) -> Response:
    broker = _broker(request)
    metrics = broker.metrics
    started = time.monotonic()
    pretty = _pretty(request)
    headers: dict[str, str] = {}
    request.state.error_headers = headers  # an error's response carries the query id too
    query_type, data_source, status = "invalid", "", 500
    try:
        query = await _read_query(request, broker.settings.max_request_bytes)
        authorize_query(request, query)  # READ on every datasource it reads (a no-op with security off)
        query_type, data_source = query.query_type, query.data_source
        headers[QUERY_ID_HEADER] = query.context.query_id
        if isinstance(query, ScanQuery) and wants_arrow(request.headers.get("accept")):
            status = 200  # errors found later travel inside the stream (broker_service.arrow_scan)
            return await arrow_scan_response(broker, query, dict(headers))
        version = answer_version(
            broker.view.version
        )  # before planning: a change meanwhile leaves the offer stale
        priority, lane = scheduling_keys(query.context.raw)
        async with broker.admission.admit(priority=priority, lane=lane):
            result = await broker.runner.run(query)
        headers[RESPONSE_CONTEXT_HEADER] = encode_response_context(result.response_context)
        if result.etag is not None:
            headers["ETag"] = result.etag
            if request.headers.get("If-None-Match") == result.etag:
                metrics.queries.labels(query_type, "304").inc()
                status = 304
                return Response(status_code=304, headers=dict(headers))
        remembered = result.etag is not None and query.context.use_result_level_cache and not pretty
        # a remembered answer is whole; another of a low-priority query is sent in pieces
        response = _answer(result, pretty, dict(headers), 0 if remembered else priority, broker)
        if remembered:
            await _remember(request, query, response, version)
        metrics.queries.labels(query_type, "200").inc()
        status = 200
        return response
    except QueryError as e:
        if e.status >= 500:
            log.warning("query failed: %s: %s", e.error, e.error_message)
        metrics.queries.labels(query_type, str(e.status)).inc()
        status = e.status
        raise
    except Exception as e:  # never a stack trace, nor an engine's own error, to the client
        err = query_engine_error(e, broker.settings.host)
        if unforeseen(err):
            log.exception("unexpected failure answering a query")
        metrics.queries.labels(query_type, str(err.status)).inc()
        status = err.status
        raise err from e
    finally:
        metrics.on_query(data_source, query_type, time.monotonic() - started, status)


async def _remember(request: Request, query: Query, response: Response, version: int) -> None:
    """An answer the result-level cache may give, for the fast path's memo (broker_service.fast_path)."""
    memo = _broker(request).answer_memo
    if memo is None:
        return
    named = query.context.query_id if "queryId" in query.context.raw else None
    raw = await request.body()  # already read: Starlette keeps it
    remember(memo, raw, version, bytes(response.body), response.raw_headers, named, query.data_source,
             query.query_type)  # fmt: skip


async def cancel_query(request: Request) -> Response:
    query_id = request.path_params["query_id"]
    QueryOwners.check_cancel(request, query_id)
    _broker(request).runner.cancel(query_id)
    request.app.state.sql_api.statements.cancel(query_id)  # a SQL statement's id cancels it whole
    return Response(status_code=202)


async def list_datasources(request: Request) -> Response:
    return _json(readable(request, _broker(request).view.data_sources()), pretty=_pretty(request))


async def datasource(request: Request) -> Response:
    view = _broker(request).view
    name = request.path_params["ds"]
    interval = _interval_param(request)
    if "full" in request.query_params:
        return _json(datasource_columns_full(view, name, interval), pretty=_pretty(request))
    return _json(datasource_columns(view, name, interval), pretty=_pretty(request))


async def datasource_part(request: Request) -> Response:
    part = request.path_params["part"]
    if part not in ("dimensions", "metrics"):
        return Response(status_code=404)
    cols = datasource_columns(_broker(request).view, request.path_params["ds"], _interval_param(request))
    return _json(cols[part], pretty=_pretty(request))


async def datasource_candidates(request: Request) -> Response:
    name = request.path_params.get("ds") or request.query_params.get("datasource")
    if not name:
        raise invalid("Missing [datasource]")
    raw = request.query_params.get("intervals")
    if not raw:
        raise invalid("Missing [intervals]")
    intervals = list(parse_segment_spec(raw.split(",")).intervals)
    return _json(candidates(_broker(request).view, name, intervals), pretty=_pretty(request))


async def query_candidates(request: Request) -> Response:
    broker = _broker(request)
    query = await _read_query(request, broker.settings.max_request_bytes)
    authorize_query(request, query)
    intervals = list(query.segment_spec.intervals)
    return _json(candidates(broker.view, query.data_source, intervals), pretty=_pretty(request))


async def status(request: Request) -> Response:
    broker = _broker(request)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    inventory = broker.inventory.status().to_json() if broker.inventory else None
    body: dict[str, Any] = {
        "version": __version__,
        "modules": [],
        "memory": {"usedMemory": usage.ru_maxrss * 1024},
        "inventory": inventory,
        "servers": len(broker.view.servers()),
        "segments": broker.view.segment_count,
        "lostSegments": broker.view.lost_segment_count,
        "runningQueries": broker.admission.running,
        "queuedQueries": broker.admission.queued,
        # SQL statements running (any step), and the relational engine's slots in use of its total
        # (and of its low-priority ones)
        "sqlStatements": len(request.app.state.sql_api.statements),
        "sqlEngine": broker.relational.status(),
        "lanes": broker.admission.lanes(),
        "uptimeSeconds": round(time.time() - broker.started, 3),
    }
    return _json(body, pretty=_pretty(request))


async def status_cache(request: Request) -> Response:
    broker = _broker(request)
    body = cache_status(broker.cache_kind, broker.segment_cache, broker.runner.result_cache)
    return _json(body, pretty=_pretty(request))


async def health(request: Request) -> Response:
    return _json(True)


async def ready(request: Request) -> Response:
    inventory = _broker(request).inventory
    ok = inventory is None or inventory.status().initialized
    return _json(ok, 200 if ok else 503)


async def prometheus(request: Request) -> Response:
    return Response(generate_latest(_broker(request).metrics.registry), media_type=CONTENT_TYPE_LATEST)


async def query_error(request: Request, exc: Exception) -> Response:
    """Every endpoint's QueryError, as Druid's error body (SQL errors in Druid's SQL shape)."""
    assert isinstance(exc, QueryError)
    host = _broker(request).settings.host
    more = RETRY_AFTER if isinstance(exc, QueryCapacityExceeded) else {}  # when a polite client retries
    sql_headers = getattr(request.state, "sql_error_headers", None)
    if sql_headers is not None:
        return sql_error(exc, host, {**sql_headers, **more})
    headers = {**(getattr(request.state, "error_headers", None) or {}), **more}
    return _json(exc.to_body(host), exc.status, pretty=_pretty(request), headers=headers or None)


ROUTES = [
    *SQL_TASK_ROUTES,
    *SQL_ROUTES,
    Route("/druid/v2", post_query, methods=["POST"]),
    Route("/druid/v2/", post_query, methods=["POST"]),
    Route("/druid/v2/datasources", list_datasources, methods=["GET"]),
    Route("/druid/v2/datasources/{ds}", datasource, methods=["GET"]),
    Route("/druid/v2/datasources/{ds}/candidates", datasource_candidates, methods=["GET"]),
    Route("/druid/v2/datasources/{ds}/{part:str}", datasource_part, methods=["GET"]),
    Route("/druid/v2/candidates", datasource_candidates, methods=["GET"]),
    Route("/druid/v2/candidates", query_candidates, methods=["POST"]),
    Route("/druid/v2/{query_id}", cancel_query, methods=["DELETE"]),
    Route("/status", status, methods=["GET"]),
    Route("/status/cache", status_cache, methods=["GET"]),
    Route("/status/health", health, methods=["GET"]),
    Route("/status/ready", ready, methods=["GET"]),
    Route("/metrics", prometheus, methods=["GET"]),
    *console_routes(),
    *COORDINATOR_ROUTES,
]


def create_app(
    broker: Broker, guard: Guard | None = None, coordinator: CoordinatorLink | None = None
) -> Starlette:
    """The broker's app; with a `guard`, every request is authenticated and authorized; with a
    `coordinator`, the task and data-management APIs are relayed to it."""

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await broker.start()
        if coordinator is not None:
            await coordinator.start()
        try:
            yield
        finally:
            if coordinator is not None:
                await coordinator.stop()
            await broker.stop()

    handlers = {**druid_error_handlers(broker.settings.host), QueryError: query_error}
    # inside the error middleware and outside routing: remembered answers (broker_service.fast_path),
    # then refusals while admission refuses (broker_service.refusal_path)
    fast = [Middleware(WholeAnswerPath, broker=broker), Middleware(RefusalPath, broker=broker)]
    app = Starlette(routes=ROUTES, lifespan=lifespan, exception_handlers=handlers, middleware=fast)
    app.state.broker = broker
    app.state.sql_api = SqlApi(broker)
    app.state.coordinator_link = coordinator
    if guard is not None:
        secure_app(app, guard)
    return app


async def _read_query(request: Request, max_bytes: int) -> Query:
    body = await request.body()
    if len(body) > 65536:  # parsing a large body must not hold the event loop
        return await asyncio.to_thread(lambda: parse_query(decode_query_body(body, max_bytes)))
    return _broker(request).parsed_bodies.parse(body, max_bytes)


def _interval_param(request: Request) -> Interval:
    raw = request.query_params.get("interval")
    if not raw:
        return default_interval(_now_ms())
    try:
        return Interval.parse(raw.replace("_", "/"))
    except ValueError as e:
        raise invalid("Invalid [interval] %s: %s", raw, e) from None
