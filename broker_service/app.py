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
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from broker_service.arrow_scan import arrow_scan_response
from broker_service.broker import Broker
from broker_service.cache_status import cache_status
from broker_service.datasource_info import (
    candidates,
    datasource_columns,
    datasource_columns_full,
    default_interval,
)
from broker_service.query_runner import QueryResult
from broker_service.response_context import encode_response_context
from broker_service.sql_api import sql_routes
from query import Query, QueryError, parse_query
from query.errors import invalid, unknown_exception
from query.request_body import decode_query_body
from query.scan import ScanQuery
from query.segment_spec import parse_segment_spec
from server_common import __version__
from server_common.json_response import druid_error_handlers
from server_common.json_response import json_response as _json
from timeline import Interval
from wire import QUERY_ID_HEADER, RESPONSE_CONTEXT_HEADER, wants_arrow

log = logging.getLogger(__name__)


def _answer(result: QueryResult, pretty: bool, headers: dict[str, str]) -> Response:
    if result.body is None or pretty:
        results = result.results if result.results is not None else orjson.loads(result.body or b"null")
        return _json(results, pretty=pretty, headers=headers)
    return Response(result.body, headers=headers, media_type="application/json")


def _error(err: QueryError, host: str, pretty: bool, headers: dict[str, str] | None = None) -> Response:
    return _json(err.to_body(host), err.status, pretty=pretty, headers=headers)


def _now_ms() -> int:
    return int(time.time() * 1000)


def create_app(broker: Broker) -> Starlette:
    host = broker.settings.host
    metrics = broker.metrics

    async def post_query(request: Request) -> Response:
        started = time.monotonic()
        pretty = "pretty" in request.query_params
        headers: dict[str, str] = {}
        query_type, data_source, status = "invalid", "", 500
        try:
            query = await _read_query(request, broker.settings.max_request_bytes)
            query_type, data_source = query.query_type, query.data_source
            headers[QUERY_ID_HEADER] = query.context.query_id
            if isinstance(query, ScanQuery) and wants_arrow(request.headers.get("accept")):
                status = 200  # errors found later travel inside the stream (broker_service.arrow_scan)
                return await arrow_scan_response(broker, query, headers)
            async with broker.admission.admit():
                result = await broker.runner.run(query)
            headers[RESPONSE_CONTEXT_HEADER] = encode_response_context(result.response_context)
            if result.etag is not None:
                headers["ETag"] = result.etag
                if request.headers.get("If-None-Match") == result.etag:
                    metrics.queries.labels(query_type, "304").inc()
                    status = 304
                    return Response(status_code=304, headers=headers)
            response = _answer(result, pretty, headers)
            metrics.queries.labels(query_type, "200").inc()
            status = 200
            return response
        except QueryError as e:
            if e.status >= 500:
                log.warning("query failed: %s: %s", e.error, e.error_message)
            metrics.queries.labels(query_type, str(e.status)).inc()
            status = e.status
            return _error(e, host, pretty, headers)
        except Exception as e:  # never a stack trace to the client
            log.exception("unexpected failure answering a query")
            metrics.queries.labels(query_type, "500").inc()
            return _error(unknown_exception(e, host), host, pretty, headers)
        finally:
            metrics.on_query(data_source, query_type, time.monotonic() - started, status)

    async def cancel_query(request: Request) -> Response:
        broker.runner.cancel(request.path_params["query_id"])
        return Response(status_code=202)

    async def list_datasources(request: Request) -> Response:
        return _json(broker.view.data_sources(), pretty="pretty" in request.query_params)

    async def datasource(request: Request) -> Response:
        pretty = "pretty" in request.query_params
        try:
            name = request.path_params["ds"]
            interval = _interval_param(request)
            if "full" in request.query_params:
                return _json(datasource_columns_full(broker.view, name, interval), pretty=pretty)
            return _json(datasource_columns(broker.view, name, interval), pretty=pretty)
        except QueryError as e:
            return _error(e, host, pretty)

    async def datasource_part(request: Request) -> Response:
        pretty = "pretty" in request.query_params
        try:
            part = request.path_params["part"]
            if part not in ("dimensions", "metrics"):
                return Response(status_code=404)
            cols = datasource_columns(broker.view, request.path_params["ds"], _interval_param(request))
            return _json(cols[part], pretty=pretty)
        except QueryError as e:
            return _error(e, host, pretty)

    async def datasource_candidates(request: Request) -> Response:
        pretty = "pretty" in request.query_params
        try:
            name = request.path_params.get("ds") or request.query_params.get("datasource")
            if not name:
                raise invalid("Missing [datasource]")
            raw = request.query_params.get("intervals")
            if not raw:
                raise invalid("Missing [intervals]")
            intervals = list(parse_segment_spec(raw.split(",")).intervals)
            return _json(candidates(broker.view, name, intervals), pretty=pretty)
        except QueryError as e:
            return _error(e, host, pretty)

    async def query_candidates(request: Request) -> Response:
        pretty = "pretty" in request.query_params
        try:
            query = await _read_query(request, broker.settings.max_request_bytes)
            intervals = list(query.segment_spec.intervals)
            return _json(candidates(broker.view, query.data_source, intervals), pretty=pretty)
        except QueryError as e:
            return _error(e, host, pretty)

    async def status(request: Request) -> Response:
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
            "uptimeSeconds": round(time.time() - broker.started, 3),
        }
        return _json(body, pretty="pretty" in request.query_params)

    async def status_cache(request: Request) -> Response:
        body = cache_status(broker.cache_kind, broker.segment_cache, broker.runner.result_cache)
        return _json(body, pretty="pretty" in request.query_params)

    async def health(request: Request) -> Response:
        return _json(True)

    async def ready(request: Request) -> Response:
        ok = broker.inventory is None or broker.inventory.status().initialized
        return _json(ok, 200 if ok else 503)

    async def prometheus(request: Request) -> Response:
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await broker.start()
        try:
            yield
        finally:
            await broker.stop()

    routes = [
        *sql_routes(broker),
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
    ]
    return Starlette(routes=routes, lifespan=lifespan, exception_handlers=druid_error_handlers(host))


async def _read_query(request: Request, max_bytes: int) -> Query:
    body = await request.body()
    obj = decode_query_body(body, max_bytes)
    return await asyncio.to_thread(parse_query, obj) if len(body) > 65536 else parse_query(obj)


def _interval_param(request: Request) -> Interval:
    raw = request.query_params.get("interval")
    if not raw:
        return default_interval(_now_ms())
    try:
        return Interval.parse(raw.replace("_", "/"))
    except ValueError as e:
        raise invalid("Invalid [interval] %s: %s", raw, e) from None
