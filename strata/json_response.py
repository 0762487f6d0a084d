"""The JSON responses every Strata server sends: compact by default, `?pretty` indented, numpy
values and non-string keys allowed (what query results contain)."""

from __future__ import annotations

from typing import Any

import orjson
from starlette.responses import Response

_OPTIONS = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS


def encode_json(body: Any) -> bytes:
    """An answer's compact JSON body (also what the broker's result-level cache stores)."""
    return orjson.dumps(body, option=_OPTIONS)


def json_response(
    body: Any, status: int = 200, *, pretty: bool = False, headers: dict[str, str] | None = None
) -> Response:
    option = _OPTIONS | orjson.OPT_INDENT_2 if pretty else _OPTIONS
    return Response(orjson.dumps(body, option=option), status, headers=headers, media_type="application/json")
