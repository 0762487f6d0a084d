"""The JSON responses every Strata server sends: compact by default, `?pretty` indented, numpy
values and non-string keys allowed (what query results contain)."""

from __future__ import annotations

from typing import Any

import orjson
from starlette.responses import Response

from strata.query.json_text import OPTIONS as _OPTIONS
from strata.query.json_text import answer_json


def encode_json(body: Any) -> bytes:
    """An answer's compact JSON body (also what the broker's result-level cache stores)."""
    return answer_json(body)


def json_response(
    body: Any, status: int = 200, *, pretty: bool = False, headers: dict[str, str] | None = None
) -> Response:
    option = _OPTIONS | orjson.OPT_INDENT_2 if pretty else _OPTIONS
    return Response(orjson.dumps(body, option=option), status, headers=headers, media_type="application/json")


def druid_error_handlers(host: str) -> dict[Any, Any]:
    """Starlette exception handlers answering unknown routes, wrong methods and anything unexpected
    with Druid's error body instead of starlette's plain text (clients parse error bodies as JSON)."""
    from starlette.exceptions import HTTPException
    from starlette.requests import Request

    from strata.query.engine_errors import query_engine_error
    from strata.query.errors import HttpRouteError

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        what = "Not found" if exc.status_code == 404 else exc.detail
        err = HttpRouteError(exc.status_code, f"{what}: {request.method} {request.url.path}")
        return json_response(err.to_body(host), err.status, headers=dict(exc.headers or {}))

    async def unexpected(request: Request, exc: Exception) -> Response:
        err = query_engine_error(exc, host)  # an engine's error its route did not map; else the catch-all
        return json_response(err.to_body(host), err.status)

    return {HTTPException: http_error, Exception: unexpected}
