"""The web console's routes: `/` (a short page linking the console and the APIs), `/console/`
(static files shipped in this package) and `/status/cluster` (the servers it pictures).

The console itself is plain HTML, JavaScript and CSS under `broker_service/console/`; everything
it shows comes from the broker's public HTTP API (see docs/console.md).
"""

from __future__ import annotations

from pathlib import Path

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from broker_service.broker import Broker
from broker_service.cluster_status import cluster_status
from strata.server.json_response import json_response

CONSOLE_DIR = Path(__file__).parent / "console"

_FRONT = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Strata broker</title></head>
<body style="font-family: sans-serif; margin: 2em">
<h1>Strata broker</h1>
<p><a href="console/">Open the web console</a></p>
<ul>
<li>Native queries: <code>POST /druid/v2/</code></li>
<li>SQL: <code>POST /druid/v2/sql/</code></li>
<li>SQL ingestion (INSERT, REPLACE): <code>POST /druid/v2/sql/task</code></li>
<li><a href="status">/status</a>, <a href="status/cache">/status/cache</a>,
<a href="status/cluster">/status/cluster</a>, <a href="metrics">/metrics</a></li>
</ul>
</body></html>
"""


async def front_page(request: Request) -> Response:
    return HTMLResponse(_FRONT)


async def status_cluster(request: Request) -> Response:
    broker: Broker = request.app.state.broker
    return json_response(await cluster_status(broker), pretty="pretty" in request.query_params)


def console_routes() -> list[BaseRoute]:
    return [
        Route("/", front_page, methods=["GET"]),
        Route("/status/cluster", status_cluster, methods=["GET"]),
        Mount("/console", app=StaticFiles(directory=CONSOLE_DIR, html=True), name="console"),
    ]
