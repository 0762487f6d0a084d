"""Druid's task API (the overlord's `/druid/indexer/v1`): submit, status, payload, reports, log,
shutdown and the task lists, with Druid's paths, JSON shapes and status codes, so Druid's scripts and
Airflow's Druid operator (post a spec, poll `.../status` until SUCCESS or FAILED) work unchanged.

Where Druid answers plain text (an unknown report or log, a bad `state=`), so does this; a bad task
spec is a 400 with DruidException's body. With security on, submitting and shutting down need
WRITE on the task's data source, reading a task READ, and listings show only readable ones.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from strata.coordinator.service import Coordinator
from strata.coordinator.task_status import API_STATES, api_state, task_status
from strata.coordinator.task_types import InvalidTask, accept
from strata.query.errors import QueryNotFound, invalid
from strata.security.http import authorize, readable
from strata.security.resources import EXTERNAL, Action, datasource
from strata.server.json_response import json_response
from strata.storage.task_store import TaskExists, TaskRow
from timeline import Interval, parse_instant

NO_REPORT = (
    "No task reports were found for this task. The task may not exist, or it may not have completed yet."
)
NO_LOG = "No log was found for this task. The task may not exist, or it may not have begun running yet."


def coordinator(request: Request) -> Coordinator:
    found: Coordinator = request.app.state.coordinator
    return found


def pretty(request: Request) -> bool:
    return "pretty" in request.query_params


async def json_body(request: Request) -> Any:
    raw = await request.body()
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        raise invalid("Malformed JSON in the request body: %s", e) from None


async def _task(request: Request, action: Action = Action.READ) -> TaskRow | None:
    row = await asyncio.to_thread(coordinator(request).tasks.get, request.path_params["task_id"])
    if row is not None:
        authorize(request, [datasource(row.datasource)], action)
    return row


async def submit(request: Request) -> Response:
    body = await json_body(request)
    try:
        submission = accept(body, int(time.time() * 1000))
        authorize(request, [datasource(submission.data_source)], Action.WRITE)
        if submission.reads:  # a SQL task: READ on what its SELECT reads, as Druid's SQL layer asks
            authorize(request, [datasource(name) for name in submission.reads], Action.READ)
        if submission.external:
            authorize(request, [EXTERNAL], Action.READ)
        await asyncio.to_thread(coordinator(request).queue.submit, submission)
    except (InvalidTask, TaskExists) as e:
        raise invalid("%s", e) from None
    return json_response({"task": submission.id})


async def payload(request: Request) -> Response:
    row = await _task(request)
    task_id = request.path_params["task_id"]
    if row is None:
        return json_response({"task": task_id, "payload": None}, 404)
    return json_response({"task": task_id, "payload": row.payload}, pretty=pretty(request))


async def status(request: Request) -> Response:
    row = await _task(request)
    task_id = request.path_params["task_id"]
    if row is None:
        return json_response({"task": task_id, "status": None}, 404)
    body = {"task": task_id, "status": coordinator(request).queue.status_of(row)}
    return json_response(body, pretty=pretty(request))


async def reports(request: Request) -> Response:
    row = await _task(request)
    if row is None or row.report is None:
        return PlainTextResponse(NO_REPORT, 404)
    return json_response(row.report, pretty=pretty(request))


async def task_log(request: Request) -> Response:
    row = await _task(request)
    raw = request.query_params.get("offset", "0")
    try:
        offset = int(raw)
    except ValueError:
        raise invalid("Invalid value for parameter [offset]: %s", raw) from None
    text = None if row is None else await asyncio.to_thread(coordinator(request).logs.read, row.id, offset)
    if text is None:
        return PlainTextResponse(NO_LOG, 404)
    return Response(text, media_type="text/plain; charset=utf-8")


async def shutdown(request: Request) -> Response:
    task_id = request.path_params["task_id"]
    row = await _task(request, Action.WRITE)
    if row is None or not await coordinator(request).queue.shutdown(task_id):
        raise QueryNotFound(f"Cannot find task with id [{task_id}]")
    return json_response({"task": task_id})


async def shutdown_all(request: Request) -> Response:
    ds = request.path_params["ds"]
    authorize(request, [datasource(ds)], Action.WRITE)
    c = coordinator(request)
    rows = await asyncio.to_thread(c.tasks.tasks, active=True, datasource=ds)
    if not rows:
        return Response(status_code=404)
    for row in rows:
        await c.queue.shutdown(row.id)
    return json_response({"dataSource": ds})


def _created_interval(text: str | None) -> Interval | None:
    if not text:
        return None
    try:
        return Interval.parse(text.replace("_", "/"))
    except ValueError as e:
        raise invalid("Invalid value for parameter [createdTimeInterval]: %s", e) from None


def _max(text: str | None) -> int | None:
    if text is None or text == "":
        return None
    try:
        value = int(text)
    except ValueError:
        raise invalid("Invalid value for parameter [max]: %s", text) from None
    if value < 0:
        raise invalid("Invalid value for parameter [max]: must not be negative, got %s", text)
    return value


async def list_tasks(request: Request, state: str | None = None) -> Response:
    """Active tasks (waiting, pending, running), then complete ones newest first (at most `max`),
    filtered by state, data source, type and creation time as Druid's `GET /tasks` does."""
    q = request.query_params
    state = state if state is not None else q.get("state")
    if state is not None and state.lower() not in API_STATES:
        known = ", ".join(API_STATES)
        return PlainTextResponse(f"Invalid task state[{state}]. Must be one of [{known}].", 400)
    created = _created_interval(q.get("createdTimeInterval"))
    limit = _max(q.get("max") if q.get("max") is not None else q.get("n"))
    c = coordinator(request)
    rows = await asyncio.to_thread(c.tasks.tasks, datasource=q.get("datasource"))
    wanted = state.lower() if state else None
    kind = q.get("type")
    picked, complete = [], 0
    for row in sorted(rows, key=lambda r: not r.active):  # stable: newest first within each
        if (wanted and api_state(row) != wanted) or (kind and row.type != kind):
            continue
        if created is not None and not _created_within(row, created):
            continue
        if not row.active:
            if limit is not None and complete >= limit:
                continue
            complete += 1
        picked.append(row)
    names = set(readable(request, sorted({r.datasource for r in picked})))
    body = [c.queue.status_of(r) for r in picked if r.datasource in names]
    return json_response(body, pretty=pretty(request))


def _created_within(row: TaskRow, interval: Interval) -> bool:
    try:
        return interval.contains_instant(parse_instant(row.created_date))
    except ValueError:
        return False


async def task_statuses(request: Request) -> Response:
    """`POST /taskStatus` with a list of ids: Druid's TaskStatus of each one found."""
    ids = await json_body(request)
    if not isinstance(ids, list) or not ids or not all(isinstance(i, str) for i in ids):
        return PlainTextResponse("No Task IDs provided.", 400)
    c = coordinator(request)
    out: dict[str, Any] = {}
    for task_id in ids:
        row = await asyncio.to_thread(c.tasks.get, task_id)
        if row is not None and row.datasource in set(readable(request, [row.datasource])):
            s = row.status
            out[task_id] = task_status(task_id, s["status"], s.get("duration", -1), s.get("errorMsg"),
                                       c.queue.status_of(row)["location"])  # fmt: skip
    return json_response(out)


async def is_leader(request: Request) -> Response:
    leading = coordinator(request).leading
    return json_response({"leader": leading}, 200 if leading else 404)


async def leader(request: Request) -> Response:
    return PlainTextResponse(f"http://{coordinator(request).settings.address}")


def _state_route(state: str) -> Any:
    async def endpoint(request: Request) -> Response:
        return await list_tasks(request, state)

    return endpoint


BASE = "/druid/indexer/v1"
TASK_ROUTES = [
    Route(f"{BASE}/task", submit, methods=["POST"]),
    Route(f"{BASE}/task/{{task_id}}", payload, methods=["GET"]),
    Route(f"{BASE}/task/{{task_id}}/status", status, methods=["GET"]),
    Route(f"{BASE}/task/{{task_id}}/reports", reports, methods=["GET"]),
    Route(f"{BASE}/task/{{task_id}}/log", task_log, methods=["GET"]),
    Route(f"{BASE}/task/{{task_id}}/shutdown", shutdown, methods=["POST"]),
    Route(f"{BASE}/datasources/{{ds}}/shutdownAllTasks", shutdown_all, methods=["POST"]),
    Route(f"{BASE}/tasks", list_tasks, methods=["GET"]),
    Route(f"{BASE}/tasks/", list_tasks, methods=["GET"]),
    Route(f"{BASE}/taskStatus", task_statuses, methods=["POST"]),
    *[Route(f"{BASE}/{state}Tasks", _state_route(state), methods=["GET"]) for state in API_STATES],
    Route(f"{BASE}/isLeader", is_leader, methods=["GET"]),
    Route(f"{BASE}/leader", leader, methods=["GET"]),
]
