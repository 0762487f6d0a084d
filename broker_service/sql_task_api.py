"""Druid's SQL-based ingestion API on the broker: `POST /druid/v2/sql/task`.

An INSERT or REPLACE is planned here (`strata.sql.ingest`, against the columns the broker knows)
and submitted to the coordinator-overlord as a `query_controller` task, with the caller's
credentials; the answer is Druid's `{"taskId", "state": "RUNNING"}` (202), after which the task is
followed through the task API (`/druid/indexer/v1/task/{taskId}/status`, `/reports`, which the
broker relays too). A statement Druid refuses gets Druid's SqlTaskStatus with the error:
`{"taskId": <sqlQueryId>, "state": "FAILED", "error": {...}}` and its status code. EXPLAIN PLAN FOR
answers inline, as the SQL API does. `GET /druid/v2/sql/task/enabled` says the API is there.

With security on, the statement needs WRITE on its target, READ on every data source it reads and
READ on the EXTERNAL resource when it reads external data (Druid's rule), else Druid's 403
(`{"taskId": "forbidden", "state": "FAILED", "error": ...}`); the coordinator checks the same again
when the task arrives.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from broker_service.coordinator_link import coordinator_of
from broker_service.sql_api import SqlApi, read_body
from strata.query.errors import QueryError, QueryUnsupported, invalid
from strata.security.errors import Forbidden
from strata.security.http import authorize
from strata.security.resources import EXTERNAL, Action, datasource
from strata.server.json_response import json_response
from strata.sql import RESULT_FORMATS, encode_rows
from strata.sql.engine_errors import engine_error
from strata.sql.guard import check_statement
from strata.sql.ingest import IngestPlan, access_of, is_ingest, plan_ingest
from strata.sql.parameters import bind

TASK_PATH = "/druid/indexer/v1/task"


def _api(request: Request) -> SqlApi:
    api: SqlApi = request.app.state.sql_api
    return api


def _failed(query_id: str, error: dict[str, Any], status: int) -> Response:
    return json_response({"taskId": query_id, "state": "FAILED", "error": error}, status)


async def post_sql_task(request: Request) -> Response:
    api = _api(request)
    host = api.broker.settings.host
    query_id = str(uuid.uuid4())
    try:
        body = await read_body(request, api.broker.settings.max_request_bytes)
        context = dict(body.get("context") or {})
        given = context.get("sqlQueryId")
        query_id = str(given) if isinstance(given, str) and given.strip() else query_id
        plan = await _plan(request, api, body, context, query_id)
        _authorize(request, plan.statement.target, plan.reads, bool(plan.inputs))
        if plan.statement.explain:
            return _explain(plan, body)
        return await _submit(request, plan, query_id)
    except Forbidden as e:  # Druid names no statement in a refusal
        return _failed("forbidden", e.to_body(host), e.status)
    except QueryError as e:
        body = e.to_body(host)
        body["context"] = {**body.get("context", {}), "sourceType": "sql"}
        return _failed(query_id, body, e.status)
    except Exception as e:  # never a stack trace to the client
        err = engine_error(e, host)
        return _failed(query_id, err.to_body(host), err.status)


async def _plan(
    request: Request, api: SqlApi, body: dict[str, Any], context: dict[str, Any], query_id: str
) -> IngestPlan:
    query = body.get("query")
    if not isinstance(query, str) or not query.strip():
        raise invalid("Field [query] must be a non-empty SQL statement")
    planning = api.planning.budget(query)
    sql = bind(query, body.get("parameters"))
    check_statement(sql)
    if not is_ingest(sql):
        raise QueryUnsupported(
            "The task API runs INSERT and REPLACE statements; send SELECT statements to /druid/v2/sql"
        )
    access = access_of(sql)  # refused before planning: a forbidden data source is never described
    if access.target is not None:
        _authorize(request, access.target, access.reads, access.external)
    await api.catalog.load(list(access.reads))  # columns of every data source it reads
    snapshot = api.catalog.snapshot(system=False)
    return await planning.run(lambda: plan_ingest(sql, snapshot, context, query_id=query_id))


def _authorize(request: Request, target: str, reads: Sequence[str], external: bool) -> None:
    authorize(request, [datasource(target)], Action.WRITE)
    if reads:
        authorize(request, [datasource(name) for name in reads], Action.READ)
    if external:
        authorize(request, [EXTERNAL], Action.READ)


def _explain(plan: IngestPlan, body: dict[str, Any]) -> Response:
    fmt = body.get("resultFormat") or "object"
    if fmt not in RESULT_FORMATS:
        raise invalid("Unknown resultFormat [%s]; one of %s", fmt, ", ".join(RESULT_FORMATS))
    payload, media = encode_rows(
        plan.explain_rows(), ["PLAN", "RESOURCES", "ATTRIBUTES"], ["STRING"] * 3, ["VARCHAR"] * 3, fmt=fmt,
        header=bool(body.get("header")), types_header=bool(body.get("typesHeader")),
        sql_types_header=bool(body.get("sqlTypesHeader")),
    )  # fmt: skip
    return Response(payload, 200, media_type=media)


async def _submit(request: Request, plan: IngestPlan, query_id: str) -> Response:
    link = coordinator_of(request)
    headers = {"content-type": "application/json"}
    if "authorization" in request.headers:
        headers["authorization"] = request.headers["authorization"]
    answer = await link.post(TASK_PATH, orjson.dumps(plan.task), headers)
    if answer.status_code == 200:
        return json_response({"taskId": plan.task_id, "state": "RUNNING"}, 202)
    try:
        error = orjson.loads(answer.content)
    except orjson.JSONDecodeError:
        message = answer.text.strip() or f"HTTP {answer.status_code}"
        error = {"error": "druidException", "errorMessage": message}
    return _failed(query_id, error, answer.status_code)


async def enabled(request: Request) -> Response:
    return json_response({"enabled": True})


SQL_TASK_ROUTES = [
    Route("/druid/v2/sql/task", post_sql_task, methods=["POST"]),
    Route("/druid/v2/sql/task/", post_sql_task, methods=["POST"]),
    Route("/druid/v2/sql/task/enabled", enabled, methods=["GET"]),
]
