"""Decoding a query request body, shared by the broker and the data nodes' HTTP endpoints."""

from __future__ import annotations

from typing import Any

import orjson

from strata.query.errors import BadJson, ResourceLimitExceeded

MAX_NESTING = 128
"""JSON levels a query may nest (objects and arrays). Real queries stay far below; the limit keeps
hostile ones (filters nested thousands deep) from reaching the recursive parsers at all."""


def check_nesting(value: Any, limit: int = MAX_NESTING) -> None:
    """Reject JSON nested deeper than `limit`, walking it without recursion."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        children = node.values() if isinstance(node, dict) else node
        if depth > limit:
            raise BadJson(f"Query JSON nests deeper than the limit of {limit} levels")
        stack.extend((c, depth + 1) for c in children if isinstance(c, (dict, list)))


def decode_query_body(body: bytes, max_bytes: int) -> Any:
    """The JSON of a request body: too large is Resource limit exceeded, not JSON is Json parse failed."""
    if len(body) > max_bytes:
        raise ResourceLimitExceeded(
            f"Query of {len(body)} bytes is larger than the limit of {max_bytes} bytes"
        )
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError as e:
        raise BadJson(f"Query body is not valid JSON: {e}") from None
    if isinstance(value, (dict, list)):
        check_nesting(value)
    return value
