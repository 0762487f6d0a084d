"""The coordinator-overlord's HTTP app: Druid's task API, its data-management API, status.

Every error is Druid's JSON body with its status code (never a stack trace): QueryError subclasses
from the handlers, and unknown routes or methods through the shared handlers.
"""

from __future__ import annotations

import resource
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from strata.coordinator.compaction_api import COMPACTION_ROUTES
from strata.coordinator.datasource_api import DATASOURCE_ROUTES
from strata.coordinator.lookups_api import LOOKUP_ROUTES
from strata.coordinator.rules_api import RULES_ROUTES
from strata.coordinator.service import Coordinator
from strata.coordinator.task_api import TASK_ROUTES, coordinator, is_leader, leader, pretty
from strata.query.errors import QueryError
from strata.security.guard import Guard
from strata.server import __version__
from strata.server.json_response import druid_error_handlers, json_response


async def status(request: Request) -> Response:
    c = coordinator(request)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    body: dict[str, Any] = {
        "version": __version__,
        "modules": [],
        "memory": {"usedMemory": usage.ru_maxrss * 1024},
        "leader": c.leading,
        "runningTasks": len(c.queue.children),
        "taskSlots": c.queue.slots,
        "duties": c.duties.status(),
        "rules": {
            "runs": c.rule_stats.runs,
            "droppedSegments": c.rule_stats.dropped,
            "segmentsMatchingNoRule": c.rule_stats.unmatched,
        },
        "uptimeSeconds": round(time.time() - c.started, 3),
    }
    return json_response(body, pretty=pretty(request))


async def health(request: Request) -> Response:
    return json_response(True)


async def prometheus(request: Request) -> Response:
    registry = coordinator(request).queue.metrics.registry
    return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)


async def ready(request: Request) -> Response:
    leading = coordinator(request).leading
    return json_response(leading, 200 if leading else 503)


ROUTES = [
    *TASK_ROUTES,
    *DATASOURCE_ROUTES,
    *RULES_ROUTES,
    *COMPACTION_ROUTES,
    *LOOKUP_ROUTES,
    Route("/druid/coordinator/v1/isLeader", is_leader, methods=["GET"]),
    Route("/druid/coordinator/v1/leader", leader, methods=["GET"]),
    Route("/status", status, methods=["GET"]),
    Route("/status/health", health, methods=["GET"]),
    Route("/status/ready", ready, methods=["GET"]),
    Route("/metrics", prometheus, methods=["GET"]),
]


def create_app(c: Coordinator, guard: Guard | None = None) -> Starlette:
    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await c.start()
        try:
            yield
        finally:
            await c.stop()

    host = c.settings.address

    async def query_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, QueryError)
        return json_response(exc.to_body(host), exc.status)

    handlers = {**druid_error_handlers(host), QueryError: query_error}
    app = Starlette(routes=ROUTES, lifespan=lifespan, exception_handlers=handlers)
    app.state.coordinator = c
    if guard is not None:
        from strata.security.http import install
        from strata.security.policy import AUTHENTICATED, COORDINATOR_RULES

        install(app, guard, COORDINATOR_RULES, AUTHENTICATED, host)
    return app
