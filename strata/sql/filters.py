"""SQL conditions as Druid native filters, and conditions on `__time` as query intervals.

Comparisons keep SQL's three-valued logic because the native typed filters (`equals`, `range`,
`in`, `null`) do; conditions on `__time` at the top of the WHERE conjunction become intervals, as
Druid's planner makes them, so the broker asks only the segments in range.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable
from typing import Any

from sqlglot import exp

from strata.query.errors import QueryUnsupported, invalid
from strata.sql.session import current_zone_info
from timeline import Interval, Period, condense_intervals, format_instant, parse_instant
from timeline.interval import MAX_INSTANT, MIN_INSTANT

TIME = "__time"
_FLIP: dict[Any, Any] = {
    exp.GT: exp.LT,
    exp.GTE: exp.LTE,
    exp.LT: exp.GT,
    exp.LTE: exp.GTE,
    exp.EQ: exp.EQ,
    exp.NEQ: exp.NEQ,
}


def column_name(node: exp.Expr) -> str | None:
    if isinstance(node, exp.Column) and not node.table:
        return node.name
    if (
        isinstance(node, exp.Cast)
        and isinstance(node.this, exp.Column)
        and not node.this.table
        and node.this.name == TIME
        and node.to.is_type("timestamp")
    ):
        return TIME  # CAST(__time AS TIMESTAMP)
    return None


def literal(node: exp.Expr, now_ms: int) -> Any:
    """A constant's value (timestamps as epoch ms); raises when the node is no constant."""
    if isinstance(node, exp.Paren):
        return literal(node.this, now_ms)
    if isinstance(node, exp.Literal):
        if node.is_string:
            return node.this
        text = node.this
        return float(text) if any(c in text for c in ".eE") else int(text)
    if isinstance(node, exp.Neg):
        return -literal(node.this, now_ms)
    if isinstance(node, exp.Null):
        return None
    if isinstance(node, exp.Boolean):
        return "true" if node.this else "false"
    if isinstance(node, (exp.Cast, exp.TryCast)) and node.to.is_type("timestamp", "date"):
        return timestamp_ms(literal(node.this, now_ms))
    if isinstance(node, exp.Anonymous) and node.name.upper() == "TIME_PARSE" and node.expressions:
        return timestamp_ms(literal(node.expressions[0], now_ms))
    if isinstance(node, exp.CurrentTimestamp):
        return now_ms
    if isinstance(node, (exp.Sub, exp.Add)) and isinstance(node.expression, exp.Interval):
        base = literal(node.this, now_ms)
        step = interval_ms(node.expression)
        return base - step if isinstance(node, exp.Sub) else base + step
    if isinstance(node, exp.Anonymous) and node.name.upper() == "MILLIS_TO_TIMESTAMP":
        return int(literal(node.expressions[0], now_ms))
    raise QueryUnsupported(
        f"Expression [{node.sql(dialect='druid')}] is not supported here; expected a constant"
    )


def timestamp_ms(value: Any) -> int:
    if isinstance(value, (int, float)):
        return int(value)
    if not isinstance(value, str):
        raise invalid("Cannot read [%s] as a timestamp", value)
    text = value.strip().replace(" ", "T", 1)
    try:
        return parse_instant(text, current_zone_info())
    except ValueError:
        raise invalid("Cannot read [%s] as a timestamp", value) from None


_UNITS = {"SECOND": 1000, "MINUTE": 60_000, "HOUR": 3_600_000, "DAY": 86_400_000, "WEEK": 7 * 86_400_000}


def interval_ms(node: exp.Interval) -> int:
    amount = node.this.this if isinstance(node.this, exp.Literal) else str(node.this)
    unit = node.unit.name.upper() if node.unit is not None else ""
    unit = unit[:-1] if unit.endswith("S") else unit
    if unit not in _UNITS:
        raise QueryUnsupported(f"INTERVAL unit [{unit or '?'}] is not supported")
    return int(float(str(amount).strip("'"))) * _UNITS[unit]


def split_time(where: exp.Expr | None, now_ms: int) -> tuple[list[str], exp.Expr | None]:
    """(query intervals, the rest of the condition)."""
    if where is None:
        return ["-146136543-09-08T08:23:32.096Z/146140482-04-24T15:36:27.903Z"], None
    terms = conjuncts(where)
    lo, hi = MIN_INSTANT, MAX_INSTANT
    ranges: list[Interval] | None = None
    rest: list[exp.Expr] = []
    for c in terms:
        c = c.unnest()
        bounds = time_bounds(c, now_ms)
        if bounds is None:
            rest.append(c)
        elif isinstance(bounds, list):
            ranges = (
                bounds if ranges is None else [r for r in (a.overlap(b) for a in ranges for b in bounds) if r]
            )
        else:
            lo, hi = max(lo, bounds[0]), min(hi, bounds[1])
    window = [Interval(lo, hi)] if lo < hi else []
    if ranges is not None:
        window = [r for r in (w.overlap(x) for w in window for x in ranges) if r]
    intervals = [f"{format_instant(i.start)}/{format_instant(i.end)}" for i in condense_intervals(window)]
    if not intervals:  # no time at all: an empty interval answers nothing
        intervals = ["1970-01-01T00:00:00.000Z/1970-01-01T00:00:00.000Z"]
    condition = None if not rest else rest[0] if len(rest) == 1 else exp.and_(*rest)
    return intervals, condition


def conjuncts(node: exp.Expr) -> list[exp.Expr]:
    """The terms of an AND tree, through any parentheses: `(a AND (b AND c))` is a, b, c. Walked
    with a stack, not recursion: a generated statement may chain thousands of ANDs."""
    out: list[exp.Expr] = []
    stack = [node]
    while stack:
        term = stack.pop().unnest()
        if isinstance(term, exp.And):
            stack += [term.expression, term.this]
        else:
            out.append(term)
    return out


def zoned_interval(text: str) -> Interval:
    """An ISO 8601 interval whose instants without an offset are in the session's zone, as Druid
    reads TIME_IN_INTERVAL's interval."""
    zone = current_zone_info()
    if zone is None or text.count("/") != 1:
        return Interval.parse(text)
    left, right = (part.strip() for part in text.split("/"))
    try:
        if left[:1].upper() == "P" and right[:1].upper() != "P":
            end = parse_instant(right, zone)
            return Interval(Period.parse(left).add_to(end, times=-1), end)
        start = parse_instant(left, zone)
        end = Period.parse(right).add_to(start) if right[:1].upper() == "P" else parse_instant(right, zone)
    except ValueError:
        raise invalid("Cannot read [%s] as an ISO 8601 interval", text) from None
    if end < start:
        raise invalid("Interval [%s] ends before it starts", text)
    return Interval(start, end)


def time_bounds(c: exp.Expr, now_ms: int) -> tuple[int, int] | list[Interval] | None:
    if isinstance(c, exp.Between) and column_name(c.this) == TIME:
        return literal(c.args["low"], now_ms), literal(c.args["high"], now_ms) + 1
    in_interval = isinstance(c, exp.Anonymous) and c.name.upper() == "TIME_IN_INTERVAL"
    if in_interval and len(c.expressions) == 2 and column_name(c.expressions[0]) == TIME:
        return [zoned_interval(str(literal(c.expressions[1], now_ms)))]
    if type(c) in _FLIP and type(c) is not exp.NEQ:
        left, right, kind = c.this, c.expression, type(c)
        if column_name(right) == TIME:
            left, right, kind = right, left, _FLIP[kind]
        if column_name(left) != TIME:
            return None
        ms = literal(right, now_ms)
        ms = timestamp_ms(ms)
        return {
            exp.GT: (ms + 1, MAX_INSTANT),
            exp.GTE: (ms, MAX_INSTANT),
            exp.LT: (MIN_INSTANT, ms),
            exp.LTE: (MIN_INSTANT, ms + 1),
            exp.EQ: (ms, ms + 1),
        }[kind]  # type: ignore[index]
    return None


Fallback = Callable[[exp.Expr], dict[str, Any]]


def to_filter(
    node: exp.Expr, types: dict[str, str], now_ms: int, fallback: Fallback | None = None
) -> dict[str, Any]:
    """A native filter for a SQL condition.

    Conditions over plain columns and constants become Druid's typed filters; any other condition
    goes to `fallback` (the planner's `expression` filter), or is unsupported without one.
    """
    node = node.unnest()
    if isinstance(node, exp.And):
        return {"type": "and", "fields": [to_filter(x, types, now_ms, fallback) for x in node.flatten()]}
    if isinstance(node, exp.Or):
        return {"type": "or", "fields": [to_filter(x, types, now_ms, fallback) for x in node.flatten()]}
    if isinstance(node, exp.Not):
        inner = node.this.unnest()
        if isinstance(inner, exp.In) and any(isinstance(v, exp.Null) for v in inner.expressions):
            return {"type": "false"}  # `x NOT IN (..., NULL)`: false or unknown, never true
        truth = _truth_test(inner, types, now_ms)
        if truth is not None:  # NOT (p IS TRUE): p false or unknown
            return _negated_truth(truth)
        return {"type": "not", "field": to_filter(node.this, types, now_ms, fallback)}
    truth = _truth_test(node, types, now_ms)
    if truth is not None:
        return _truth_filter(truth)
    try:
        return _leaf_filter(node, types, now_ms)
    except QueryUnsupported:
        if fallback is None:
            raise
        return fallback(node)


def _truth_test(
    node: exp.Expr, types: dict[str, str], now_ms: int
) -> tuple[dict[str, Any], str, bool] | None:
    """`p IS TRUE` / `p IS FALSE` over a column filter `p` that is unknown only where its column is
    null: (the filter of p, the column, whether it tests TRUE); None for anything else."""
    if not isinstance(node, exp.Is) or not isinstance(node.expression, exp.Boolean):
        return None
    inner: exp.Expr = node.this.unnest()
    if isinstance(inner, exp.In) and inner.args.get("query"):
        return None
    if not isinstance(inner, exp.In) and type(inner) not in _FLIP:
        return None
    try:
        leaf = _leaf_filter(inner, types, now_ms)
    except QueryUnsupported:
        return None
    column = leaf.get("column")
    if not isinstance(column, str) or leaf.get("type") not in ("equals", "in", "range", "not"):
        return None
    return leaf, column, bool(node.expression.this)


def _truth_filter(test: tuple[dict[str, Any], str, bool]) -> dict[str, Any]:
    """`p IS TRUE` is p; `p IS FALSE` is p false on a non-null value."""
    leaf, column, true = test
    if true:
        return leaf
    return {
        "type": "and",
        "fields": [{"type": "not", "field": leaf}, {"type": "not", "field": _null(column)}],
    }


def _negated_truth(test: tuple[dict[str, Any], str, bool]) -> dict[str, Any]:
    """`p IS NOT TRUE` holds where p is false or unknown (its column null); `IS NOT FALSE` alike."""
    leaf, column, true = test
    return {"type": "or", "fields": [{"type": "not", "field": leaf} if true else leaf, _null(column)]}


def _null(column: str) -> dict[str, Any]:
    return {"type": "null", "column": column}


def _leaf_filter(node: exp.Expr, types: dict[str, str], now_ms: int) -> dict[str, Any]:
    if isinstance(node, exp.Is) and isinstance(node.expression, exp.Null):
        return {"type": "null", "column": _column(node.this)}
    if isinstance(node, exp.In) and not node.args.get("query"):
        col = _column(node.this)
        values = [literal(v, now_ms) for v in node.expressions]
        if any(v is None for v in values):
            values = [v for v in values if v is not None]
        vtype = _value_type(values[0] if values else "", types.get(col))
        return {"type": "in", "column": col, "matchValueType": vtype, "values": _typed(values, vtype)}
    if isinstance(node, exp.Between):
        col = _column(node.this)
        low, high = literal(node.args["low"], now_ms), literal(node.args["high"], now_ms)
        btype = _value_type(low, types.get(col))
        return {
            "type": "range",
            "column": col,
            "matchValueType": btype,
            "lower": _typed([low], btype)[0],
            "upper": _typed([high], btype)[0],
        }
    if isinstance(node, exp.Like):
        return {"type": "like", "dimension": _column(node.this), "pattern": literal(node.expression, now_ms)}
    if isinstance(node, exp.Escape) and isinstance(node.this, exp.Like):
        like = to_filter(node.this, types, now_ms)
        return {**like, "escape": literal(node.expression, now_ms)}
    if type(node) in _FLIP:
        left, right = node.this, node.expression
        kind: Any = type(node)
        if column_name(left) is None and column_name(right) is not None:
            left, right, kind = right, left, _FLIP[kind]
        col = _column(left)
        value = literal(right, now_ms)
        if value is None:  # comparing with NULL is never true
            return {"type": "false"}
        if col == TIME:
            value = timestamp_ms(value)
        vtype = _value_type(value, types.get(col))
        (value,) = _typed([value], vtype)
        if kind is exp.EQ:
            return {"type": "equals", "column": col, "matchValueType": vtype, "matchValue": value}
        if kind is exp.NEQ:
            return {
                "type": "not",
                "field": {"type": "equals", "column": col, "matchValueType": vtype, "matchValue": value},
            }
        side = "lower" if kind in (exp.GT, exp.GTE) else "upper"
        return {
            "type": "range",
            "column": col,
            "matchValueType": vtype,
            side: value,
            f"{side}Open": kind in (exp.GT, exp.LT),
        }
    raise QueryUnsupported(f"Condition [{node.sql(dialect='druid')}] is not supported")


def _column(node: exp.Expr) -> str:
    name = column_name(node)
    if name is None:
        raise QueryUnsupported(f"[{node.sql(dialect='druid')}] is not supported here; expected a column")
    return name


def _value_type(value: Any, column_type: str | None) -> str:
    if isinstance(value, (bool, str)):
        return "STRING"
    if isinstance(value, int):
        return "LONG"
    return "DOUBLE"


def _typed(values: list[Any], kind: str) -> list[Any]:
    if kind == "STRING":
        return [v if isinstance(v, str) else str(v) for v in values]
    return values


def iso(ms: int) -> str:
    return format_instant(ms)


def now_millis() -> int:
    return int(datetime.datetime.now(datetime.UTC).timestamp() * 1000)


SIMPLE_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
