"""Druid's retention rules API (`/druid/coordinator/v1/rules`): the rules of every data source, of
one (`?full`: with the cluster's default rules after them), setting them (with Druid's audit
headers `X-Druid-Author` / `X-Druid-Comment`), and the history of changes.

Answers are Druid's: a POST answers 200 with no body (also for a data source with no segments),
rules that are not Druid's shape a 400 `{"error": ...}`; a history by `count` lists the newest
changes first, one by `interval` (default: the last week) oldest first. A change is kept in the
metadata store; the rule duty and every historical read the rules in force from there.
"""

from __future__ import annotations

import asyncio
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from strata.coordinator.task_api import coordinator, json_body, pretty
from strata.server.json_response import json_response
from strata.storage.audit_log import AuditInfo
from strata.storage.retention_rules import DEFAULT_RULES, DEFAULT_RULES_KEY, RuleError, parse_rules
from timeline import Interval

V1 = "/druid/coordinator/v1"


def audit_info(request: Request) -> AuditInfo:
    """Druid's AuthorizationUtils.buildAuditInfo: the change's author and comment headers and the
    caller's address."""
    h = request.headers
    ip = request.client.host if request.client is not None else ""
    return AuditInfo(h.get("X-Druid-Author", ""), h.get("X-Druid-Comment", ""), ip)


def error(message: str, status: int = 400) -> Response:
    """Druid's `{"error": message}` answer of its coordinator resources."""
    return json_response({"error": message}, status)


async def _current(request: Request) -> dict[str, list[dict[str, Any]]]:
    current = await asyncio.to_thread(coordinator(request).rules.current)
    current.setdefault(DEFAULT_RULES_KEY, [dict(r) for r in DEFAULT_RULES])
    return current


async def all_rules(request: Request) -> Response:
    """Every data source's rules (the cluster's state: STATE READ with security on, as Druid's)."""
    current = await _current(request)
    return json_response(dict(sorted(current.items())), pretty=pretty(request))


async def datasource_rules(request: Request) -> Response:
    ds = request.path_params["ds"]
    current = await _current(request)
    rules = list(current.get(ds, []))
    if "full" in request.query_params and ds != DEFAULT_RULES_KEY:
        rules += current[DEFAULT_RULES_KEY]
    return json_response(rules, pretty=pretty(request))


async def set_rules(request: Request) -> Response:
    ds = request.path_params["ds"]
    try:
        rules = [r.to_json() for r in parse_rules(await json_body(request))]
    except RuleError as e:
        return error(str(e))
    c = coordinator(request)
    await asyncio.to_thread(c.rules.set, ds, rules, audit_info(request))
    c.duties.wake("run-rules")
    return Response(status_code=200)


def history_args(request: Request) -> tuple[Interval | None, int | None]:
    q = request.query_params
    interval = count = None
    if q.get("interval"):
        interval = Interval.parse(q["interval"].replace("_", "/"))
    if q.get("count") and interval is None:  # Druid: the two are not combined
        count = int(q["count"])
    return interval, count


async def _history(request: Request, ds: str | None) -> Response:
    try:
        interval, count = history_args(request)
        entries = await asyncio.to_thread(
            coordinator(request).rules.audit.history, "rules", ds, interval=interval, count=count
        )
    except ValueError as e:
        return error(str(e))
    return json_response(entries, pretty=pretty(request))


async def all_history(request: Request) -> Response:
    return await _history(request, None)


async def datasource_history(request: Request) -> Response:
    return await _history(request, request.path_params["ds"])


RULES_ROUTES = [
    Route(f"{V1}/rules", all_rules, methods=["GET"]),
    Route(f"{V1}/rules/history", all_history, methods=["GET"]),
    Route(f"{V1}/rules/{{ds}}", datasource_rules, methods=["GET"]),
    Route(f"{V1}/rules/{{ds}}", set_rules, methods=["POST"]),
    Route(f"{V1}/rules/{{ds}}/history", datasource_history, methods=["GET"]),
]
