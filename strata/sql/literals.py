"""Literals checked before planning, as Druid's SQL validator checks them: a LIMIT that is not a
64-bit count, a number no SQL type holds, a date or timestamp that is no calendar's, a regular
expression no engine compiles - each the user's 400 naming the literal, never an engine's 500
from deep inside a plan."""

from __future__ import annotations

import math
from collections.abc import Iterator

from sqlglot import exp

from strata.query.errors import invalid
from strata.query.regex_check import check_regex
from timeline import parse_instant

MAX_LONG = 2**63 - 1
MIN_LONG = -(2**63)
_CALENDAR_TYPES = {exp.DType.TIMESTAMP: "TIMESTAMP", exp.DType.DATE: "DATE"}
_FORMATS = {"TIMESTAMP": "yyyy-MM-dd HH:mm:ss", "DATE": "yyyy-MM-dd"}
_CLAUSES: dict[type[exp.Expr], str] = {exp.Limit: "LIMIT", exp.Offset: "OFFSET", exp.Fetch: "FETCH"}
_PATTERN_FUNCTIONS: dict[type[exp.Expr], str] = {
    exp.RegexpExtract: "REGEXP_EXTRACT",
    exp.RegexpLike: "REGEXP_LIKE",
    exp.RegexpReplace: "REGEXP_REPLACE",
}


def check_literals(tree: exp.Expr) -> None:
    """Raise Druid's 400 for the first literal of `tree` no engine could take."""
    for node in _walk(tree):
        if isinstance(node, (exp.Limit, exp.Offset, exp.Fetch)):
            _check_count(node)
        elif isinstance(node, exp.Literal) and not node.is_string:
            _check_number(node)
        elif isinstance(node, exp.Cast) and isinstance(node.this, exp.Literal) and node.this.is_string:
            _check_calendar(node)
        elif type(node) in _PATTERN_FUNCTIONS:
            pattern = node.args.get("expression")
            if isinstance(pattern, exp.Literal) and pattern.is_string:
                check_regex(pattern.this, f"function [{_PATTERN_FUNCTIONS[type(node)]}]")


def _walk(tree: exp.Expr) -> Iterator[exp.Expr]:
    """Every node, without recursion (a statement may nest as deep as the guard allows)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        for value in node.args.values():
            if isinstance(value, exp.Expr):
                stack.append(value)
            elif isinstance(value, list):
                stack.extend(v for v in value if isinstance(v, exp.Expr))


def _check_count(node: exp.Expr) -> None:
    clause = _CLAUSES[type(node)]
    value = node.args.get("expression") or node.args.get("count")
    if value is None or isinstance(value, exp.Placeholder):
        return
    text = value.sql(dialect="druid")
    number = _integer(value)
    if number is None or not 0 <= number <= MAX_LONG:
        raise invalid("%s must be an integer from 0 to %d, got [%s]", clause, MAX_LONG, text[:100])


def _integer(node: exp.Expr) -> int | None:
    if isinstance(node, exp.Literal) and not node.is_string and str(node.this).isdigit():
        return int(str(node.this))
    return None


def _check_number(node: exp.Literal) -> None:
    text = str(node.this)
    if text.isdigit():  # an exact number: Druid's planner holds it in a BIGINT
        if int(text) > MAX_LONG + 1:  # (its negation, -2^63, is the least BIGINT)
            raise invalid("Numeric literal '%s' out of range", _shown(text))
        return
    try:
        value = float(text)
    except ValueError:
        return  # sqlglot's own reading of an odd token: the planner says what it is
    if math.isinf(value):
        raise invalid("Numeric literal '%s' out of range", _shown(text))


def _check_calendar(node: exp.Cast) -> None:
    kind = next((name for dtype, name in _CALENDAR_TYPES.items() if node.to.is_type(dtype)), None)
    if kind is None:
        return
    text = str(node.this.this).strip()
    try:
        parse_instant(text.replace(" ", "T", 1))
    except ValueError:
        raise invalid(
            "Illegal %s literal '%s': not in format '%s'", kind, _shown(text), _FORMATS[kind]
        ) from None


def _shown(text: str) -> str:
    return text if len(text) <= 100 else text[:100] + "..."
