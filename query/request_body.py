"""Decoding a query request body, shared by the broker and the data nodes' HTTP endpoints."""

from __future__ import annotations

from typing import Any

import orjson

from query.errors import BadJson, ResourceLimitExceeded


def decode_query_body(body: bytes, max_bytes: int) -> Any:
    """The JSON of a request body: too large is Resource limit exceeded, not JSON is Json parse failed."""
    if len(body) > max_bytes:
        raise ResourceLimitExceeded(
            f"Query of {len(body)} bytes is larger than the limit of {max_bytes} bytes"
        )
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as e:
        raise BadJson(f"Query body is not valid JSON: {e}") from None
