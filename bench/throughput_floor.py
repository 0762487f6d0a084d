"""The bare-framework floor of bench.throughput: Starlette on uvicorn, answering the broker's bytes.

    python -m bench.throughput_floor --port PORT --answers FILE

FILE is JSON: a list of `{"request": body, "response": body, "headers": {name: value}}` recorded
from the broker. A POST to /druid/v2/ whose body is one of the requests gets that response's exact
bytes and headers, served by stock uvicorn as the broker's `strata.server.lifecycle.serve` sets it
up (httptools, asyncio's loop, no access log, one process) but with none of Strata's own server
code: what the broker costs beyond this floor is its own.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route


def floor_app(answers: list[dict[str, object]]) -> Starlette:
    known = {
        str(a["request"]).encode(): (str(a["response"]).encode(), dict(a["headers"]))  # type: ignore[call-overload]
        for a in answers
    }

    async def answer(request: Request) -> Response:
        found = known.get(await request.body())
        if found is None:
            return Response(status_code=404)
        body, headers = found
        return Response(body, headers=headers, media_type="application/json")

    async def health(request: Request) -> Response:
        return Response(b"true", media_type="application/json")

    routes = [Route("/druid/v2/", answer, methods=["POST"]), Route("/status/health", health)]
    return Starlette(routes=routes)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--answers", type=Path, required=True)
    args = ap.parse_args(argv)
    app = floor_app(json.loads(args.answers.read_text()))
    uvicorn.run(app, host=args.host, port=args.port, http="httptools", loop="asyncio", log_level="warning",
                access_log=False, lifespan="off")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
