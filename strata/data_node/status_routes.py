"""The status routes every data node answers: `/status` (Druid's shape plus a `strata` section),
`/status/health`, `/status/ready` and `/metrics` (Prometheus)."""

from __future__ import annotations

import os
import resource
from collections.abc import Callable
from typing import Any

from prometheus_client import CollectorRegistry
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from strata.server.json_response import json_response


def memory() -> dict[str, int]:
    """Druid's `/status` memory block, from this process's peak resident size."""
    used = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return {"maxMemory": total, "totalMemory": total, "freeMemory": total - used, "usedMemory": used,
            "directMemory": 0}  # fmt: skip


def node_status_routes(
    strata: Callable[[], dict[str, Any]], ready: Callable[[], bool], registry: Callable[[], CollectorRegistry]
) -> list[BaseRoute]:
    """`strata()` gives the node's own `/status` section, `ready()` its readiness."""
    from strata.server import __version__

    async def status(request: Request) -> Response:
        return json_response({"version": __version__, "modules": [], "memory": memory(), "strata": strata()})

    async def health(request: Request) -> Response:
        return json_response(True)

    async def readiness(request: Request) -> Response:
        ok = ready()
        return json_response(ok, 200 if ok else 503)

    async def metrics(request: Request) -> Response:
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        return Response(generate_latest(registry()), media_type=CONTENT_TYPE_LATEST)

    return [
        Route("/status", status),
        Route("/status/health", health),
        Route("/status/ready", readiness),
        Route("/metrics", metrics),
    ]
