"""Druid's automatic compaction API: the per-data-source configs (`/druid/coordinator/v1/config/compaction`:
GET all or one, POST one, DELETE one, its history, the task slots) and the last run's status and
progress (`/druid/coordinator/v1/compaction/status`, `.../progress`), with Druid's answers: 200 with
no body for a change, 404 with no body for a config that is not there, 400 `{"error": ...}` for a
config Druid would refuse, `{"error": "unknown dataSource"}` for a status nobody computed.
`POST /druid/coordinator/v1/compaction/compact` runs the duty now (Druid's, for its tests).
"""

from __future__ import annotations

import asyncio
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from strata.coordinator import compaction_config as cc
from strata.coordinator.rules_api import audit_info, error, history_args
from strata.coordinator.task_api import coordinator, json_body, pretty
from strata.server.json_response import json_response

V1 = "/druid/coordinator/v1"
DUTY = "compact-segments"


async def _document(request: Request) -> dict[str, Any]:
    return cc.global_config(await asyncio.to_thread(coordinator(request).configs.get, cc.CONFIG_KEY))


async def get_all(request: Request) -> Response:
    return json_response(await _document(request), pretty=pretty(request))


async def _update(request: Request, change: Any) -> Response:
    c = coordinator(request)
    try:
        await asyncio.to_thread(c.configs.update, cc.CONFIG_KEY, change, audit_info(request))
    except cc.ConfigError as e:
        return error(str(e))
    except KeyError:
        return Response(status_code=404)
    return Response(status_code=200)


async def post_datasource(request: Request) -> Response:
    try:
        config = cc.parse_datasource_config(await json_body(request))
    except cc.ConfigError as e:
        return error(str(e))
    return await _update(request, lambda doc: cc.with_datasource(doc, config))


async def task_slots(request: Request) -> Response:
    q = request.query_params
    try:
        ratio = float(q["ratio"]) if q.get("ratio") else None
        most = int(q["max"]) if q.get("max") else None
    except ValueError as e:
        return error(f"Invalid value for a query parameter: {e}")
    auto = q["useAutoScaleSlots"].lower() == "true" if q.get("useAutoScaleSlots") else None
    return await _update(request, lambda doc: cc.with_slots(doc, ratio, most, auto))


async def get_datasource(request: Request) -> Response:
    ds = request.path_params["ds"]
    found = next((c for c in (await _document(request))["compactionConfigs"] if c["dataSource"] == ds), None)
    if found is None:
        return Response(status_code=404)
    return json_response(found, pretty=pretty(request))


async def delete_datasource(request: Request) -> Response:
    ds = request.path_params["ds"]
    return await _update(request, lambda doc: cc.without_datasource(doc, ds))


async def history(request: Request) -> Response:
    try:
        interval, count = history_args(request)
        audit = coordinator(request).configs.audit
        entries = await asyncio.to_thread(
            audit.history, cc.CONFIG_KEY, cc.CONFIG_KEY, interval=interval, count=count
        )
    except ValueError as e:
        return error(str(e))
    if count is not None:
        entries = list(reversed(entries))  # the change by change history reads oldest first
    return json_response(cc.history(entries, request.path_params["ds"]), pretty=pretty(request))


async def status(request: Request) -> Response:
    statuses = coordinator(request).compaction_status
    ds = request.query_params.get("dataSource")
    if ds is not None:
        if ds not in statuses:
            return error("unknown dataSource", 404)
        return json_response({"latestStatus": [statuses[ds]]}, pretty=pretty(request))
    return json_response({"latestStatus": [statuses[k] for k in sorted(statuses)]}, pretty=pretty(request))


async def progress(request: Request) -> Response:
    found = coordinator(request).compaction_status.get(request.query_params.get("dataSource") or "")
    if found is None:
        return error("unknown dataSource", 404)
    return json_response({"remainingSegmentSize": found["bytesAwaitingCompaction"]})


async def run_now(request: Request) -> Response:
    c = coordinator(request)
    duty = next(d for d in c.duties.duties if d.name == DUTY)
    await c.duties.run_once(duty)
    return Response(status_code=200)


COMPACTION_ROUTES = [
    Route(f"{V1}/config/compaction", get_all, methods=["GET"]),
    Route(f"{V1}/config/compaction", post_datasource, methods=["POST"]),
    Route(f"{V1}/config/compaction/taskslots", task_slots, methods=["POST"]),
    Route(f"{V1}/config/compaction/{{ds}}", get_datasource, methods=["GET"]),
    Route(f"{V1}/config/compaction/{{ds}}", delete_datasource, methods=["DELETE"]),
    Route(f"{V1}/config/compaction/{{ds}}/history", history, methods=["GET"]),
    Route(f"{V1}/compaction/status", status, methods=["GET"]),
    Route(f"{V1}/compaction/progress", progress, methods=["GET"]),
    Route(f"{V1}/compaction/compact", run_now, methods=["POST"]),
]
