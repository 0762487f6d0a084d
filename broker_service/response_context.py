"""The `X-Druid-Response-Context` header, capped as Druid caps it (issue #2331: ~7 KiB).

When too long, the longest lists are halved until the header fits (then whole keys dropped), and
`"truncated": true` tells the client the header is incomplete.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

MAX_HEADER_CHARS = 7 * 1024


def _dumps(context: dict[str, Any]) -> str:
    """JSON in ASCII: a header value carries no raw non-Latin-1 text (a datasource named in
    another script would not encode), so such characters travel as JSON escapes."""
    text = orjson.dumps(context).decode()
    return text if text.isascii() else json.dumps(context, ensure_ascii=True, separators=(",", ":"))


def encode_response_context(context: dict[str, Any], max_chars: int = MAX_HEADER_CHARS) -> str:
    text = _dumps(context)
    if len(text) <= max_chars:
        return text
    ctx = dict(context)
    ctx["truncated"] = True
    while True:
        lists = [(len(v), k) for k, v in ctx.items() if isinstance(v, list) and v]
        if lists:
            _, key = max(lists)
            values = ctx[key]
            ctx[key] = values[: len(values) // 2]
        else:
            droppable = [k for k in ctx if k != "truncated"]
            if not droppable:
                break
            del ctx[droppable[-1]]
        text = _dumps(ctx)
        if len(text) <= max_chars:
            break
    return text
