"""A tiny ASGI app served by `strata.server.lifecycle.serve`, for the drain tests (run as a process).

    python -m tests.lifecycle.slow_app PORT DRAIN_SECONDS MARKER_FILE

GET /slow?s=SECONDS answers after SECONDS; /status/health at once. The stop hook writes
MARKER_FILE, so a test sees that it ran before the drain.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from strata.server.lifecycle import serve


async def slow(request: Request) -> PlainTextResponse:
    await asyncio.sleep(float(request.query_params.get("s", "1")))
    return PlainTextResponse("done")


async def health(request: Request) -> PlainTextResponse:
    return PlainTextResponse("true")


def main() -> int:
    port, drain, marker = int(sys.argv[1]), float(sys.argv[2]), Path(sys.argv[3])

    async def on_stop() -> None:
        await asyncio.to_thread(marker.write_text, "stopping")

    app = Starlette(routes=[Route("/slow", slow), Route("/status/health", health)])
    return serve(app, "127.0.0.1", port, drain_s=drain, on_stop=on_stop)


if __name__ == "__main__":
    raise SystemExit(main())
