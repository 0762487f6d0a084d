"""Druid SQL's dynamic parameters: `?` placeholders bound to typed values before parsing.

A Druid client sends `"parameters": [{"type": "TIMESTAMP", "value": "2015-09-12 00:00:00"}, ...]`;
each value becomes a literal of its SQL type (a TIMESTAMP literal, not a string that happens to
look like one), so the planner sees what Druid's planner sees.
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Iterator
from typing import Any

from strata.query.errors import invalid

_INTEGERS = {"BIGINT", "INTEGER", "SMALLINT", "TINYINT"}
_REALS = {"DOUBLE", "FLOAT", "REAL", "DECIMAL", "NUMERIC"}
_STRINGS = {"VARCHAR", "CHAR", "STRING"}


def bind(sql: str, parameters: Any) -> str:
    """`sql` with every `?` outside quotes, identifiers and comments replaced by its parameter."""
    if not parameters:
        return sql
    if not isinstance(parameters, list):
        raise invalid("Field [parameters] must be an array")
    values = iter(parameters)
    out: list[str] = []
    for piece, is_placeholder in _pieces(sql):
        if not is_placeholder:
            out.append(piece)
            continue
        try:
            parameter = next(values)
        except StopIteration:
            raise invalid("SQL has more ? placeholders than parameters ([%d])", len(parameters)) from None
        out.append(literal(parameter))
    if next(values, _END) is not _END:
        raise invalid("SQL has fewer ? placeholders than parameters ([%d])", len(parameters))
    return "".join(out)


_END = object()


def literal(parameter: Any) -> str:
    """One parameter as a Druid SQL literal of its declared type."""
    if isinstance(parameter, dict):
        kind = str(parameter.get("type") or "").upper()
        value = parameter.get("value")
    else:
        kind, value = "", parameter
    if value is None:
        return "NULL" if not kind or kind == "NULL" else f"CAST(NULL AS {_cast_type(kind)})"
    if kind == "ARRAY" or isinstance(value, list):
        if not isinstance(value, list):
            raise invalid("Parameter of type [ARRAY] needs an array value, got [%s]", value)
        return "ARRAY[" + ", ".join(literal(v) for v in value) + "]"
    if kind in _INTEGERS:
        return str(_number(value, kind, int))
    if kind in _REALS:
        return repr(float(_number(value, kind, float)))
    if kind == "BOOLEAN":
        return "TRUE" if _boolean(value) else "FALSE"
    if kind == "TIMESTAMP":
        return f"TIMESTAMP '{_timestamp(value)}'"
    if kind == "DATE":
        return f"DATE '{_timestamp(value)[:10]}'"
    if kind in _STRINGS or isinstance(value, str):
        return _string(str(value))
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(_number(value, "DOUBLE", float))
    raise invalid("Parameter [%s] of type [%s] is not supported", value, kind or type(value).__name__)


def _pieces(sql: str) -> Iterator[tuple[str, bool]]:
    """The text in runs, each placeholder `?` alone (quoted text and comments never hold one)."""
    start, i, n = 0, 0, len(sql)
    while i < n:
        ch = sql[i]
        if ch in "'\"":
            end = sql.find(ch, i + 1)
            while end != -1 and end + 1 < n and sql[end + 1] == ch:  # a doubled quote inside
                end = sql.find(ch, end + 2)
            i = n if end == -1 else end + 1
        elif sql.startswith("--", i):
            end = sql.find("\n", i)
            i = n if end == -1 else end + 1
        elif sql.startswith("/*", i):
            end = sql.find("*/", i + 2)
            i = n if end == -1 else end + 2
        elif ch == "?":
            yield sql[start:i], False
            yield "?", True
            i += 1
            start = i
        else:
            i += 1
    yield sql[start:], False


def _number(value: Any, kind: str, cast: type[int] | type[float]) -> int | float:
    if isinstance(value, bool):
        raise invalid("Parameter of type [%s] needs a number, got [%s]", kind, value)
    try:
        number = cast(value)
    except (TypeError, ValueError):
        raise invalid("Parameter of type [%s] needs a number, got [%s]", kind, value) from None
    if isinstance(number, float) and not math.isfinite(number):
        raise invalid("Parameter of type [%s] must be finite, got [%s]", kind, value)
    return number


def _boolean(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    if isinstance(value, (int, float)):
        return value != 0
    raise invalid("Parameter of type [BOOLEAN] needs true or false, got [%s]", value)


def _timestamp(value: Any) -> str:
    """`yyyy-MM-dd HH:mm:ss.SSS` from epoch milliseconds or a timestamp text."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        instant = datetime.datetime.fromtimestamp(value / 1000, datetime.UTC)
        return instant.strftime("%Y-%m-%d %H:%M:%S.%f")[:23]
    text = str(value).strip()
    if not text or "'" in text or len(text) > 64:
        raise invalid("Parameter of type [TIMESTAMP] needs a timestamp, got [%s]", value)
    return text.replace("T", " ", 1).rstrip("Z")


def _string(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _cast_type(kind: str) -> str:
    if kind in _INTEGERS or kind in _REALS or kind in ("BOOLEAN", "TIMESTAMP", "DATE"):
        return kind
    return "VARCHAR"
