"""CAST, conditionals and operators with Druid's semantics in DuckDB.

CAST follows Druid: to TIMESTAMP a string parses in sqlTimeZone and a number is epoch ms; to DATE
the day is the one in sqlTimeZone; a TIMESTAMP prints as `yyyy-MM-dd HH:mm:ss` in the zone; a
DOUBLE casts to BIGINT truncating (Java), a string to a number is null when it is not one.
`TIMESTAMP '...'` literals and strings compared with timestamps are read in sqlTimeZone. Two
LONGs divide as Java longs.
"""

from __future__ import annotations

from sqlglot import exp

from strata.query.expressions.duck import null_elements_first
from strata.query.expressions.typed import java_long_sum
from strata.sql.functions.fragments import duck, kind, kind_of_type, sql_of, text_of, typed
from strata.sql.functions.numeric import divide
from strata.sql.functions.spec import Context, FunctionSpec, Rewrite, specs
from strata.sql.functions.time import shift_months
from strata.sql.functions.time_values import (
    as_timestamp,
    local_time,
    millis,
    sql_timestamp_ms,
    timestamp_literal,
)


def cast(node: exp.Expr, ctx: Context) -> exp.Expr:
    """CAST with Druid's rules for timestamps, dates and numbers (see the module docstring)."""
    assert isinstance(node, exp.Cast)
    inner: exp.Expr = node.this
    source, target = kind(inner), kind_of_type(node.to)
    if target == "TIMESTAMP":
        return as_timestamp(inner, ctx) if source != "TIMESTAMP" else inner
    if target == "DATE":
        if source == "DATE":
            return inner
        if isinstance(inner, exp.Literal) and inner.is_string:
            day = sql_timestamp_ms(str(inner.this), None) // 86_400_000 * 86_400_000
            return typed(duck(f"CAST({sql_of(timestamp_literal(day))} AS DATE)"), "DATE")
        return typed(duck(f"CAST({local_time(inner, ctx, ctx.zone)} AS DATE)"), "DATE")
    if source in ("TIMESTAMP", "DATE"):
        if target == "BIGINT" or target == "DOUBLE":
            ms = millis(inner, ctx)
            return typed(duck(f"CAST({ms} AS {'BIGINT' if target == 'BIGINT' else 'DOUBLE'})"), target)
        if target == "VARCHAR" and source == "TIMESTAMP":
            local = local_time(inner, ctx, ctx.zone)
            return typed(duck(f"strftime({local}, '%Y-%m-%d %H:%M:%S')"), "VARCHAR")
    if target == "BIGINT" and source == "DOUBLE":
        return typed(duck(f"CAST(trunc({sql_of(inner)}) AS BIGINT)"), "BIGINT")
    if target == "BIGINT" and source == "VARCHAR":
        return typed(duck(_string_to_bigint(sql_of(inner))), "BIGINT")
    if target == "BIGINT" and source is None:
        return typed(duck(_any_to_bigint(sql_of(inner))), "BIGINT")
    if target == "VARCHAR" and source == "DOUBLE":
        return typed(duck(text_of(inner)), "VARCHAR")
    if target == "DOUBLE" and source in ("VARCHAR", None):  # not a number: null; a DECIMAL is a DOUBLE
        to = exp.DataType.build("DOUBLE") if node.to.is_type(exp.DataType.Type.DECIMAL) else node.to
        return typed(exp.TryCast(this=inner, to=to), target)
    return node  # DuckDB casts the rest as Druid does (a BOOLEAN prints true/false)


def _string_to_bigint(text: str) -> str:
    """Druid's string to LONG: whole numbers exactly; decimals truncate, as Java reading a double
    does; anything else is null."""
    return (
        f"(CASE WHEN regexp_full_match({text}, '\\s*[+-]?[0-9]+\\s*') THEN TRY_CAST({text} AS BIGINT)"
        f" ELSE TRY_CAST(trunc(TRY_CAST({text} AS DOUBLE)) AS BIGINT) END)"
    )


def _any_to_bigint(value: str) -> str:
    """A value whose type the planner does not know (an UNNEST alias on the broker, say) to LONG by
    its type in DuckDB: a string as `_string_to_bigint`, a fraction truncated, a whole number as is.
    Every branch binds whatever the type, so the cast never fails where Druid gives null."""
    kind = f"typeof({value})"
    return (
        f"(CASE WHEN {kind} = 'VARCHAR' THEN {_string_to_bigint(f'CAST({value} AS VARCHAR)')}"
        f" WHEN {kind} IN ('DOUBLE', 'FLOAT') OR {kind} LIKE 'DECIMAL%'"
        f" THEN TRY_CAST(trunc(TRY_CAST({value} AS DOUBLE)) AS BIGINT)"
        f" ELSE TRY_CAST({value} AS BIGINT) END)"
    )


_COMPARISONS = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE)
_ORDERINGS = (exp.GT, exp.GTE, exp.LT, exp.LTE)


def compare(node: exp.Expr, ctx: Context) -> exp.Expr:
    """A string constant compared with a timestamp is a timestamp in sqlTimeZone; arrays order
    element by element with a null element first, as Druid orders them (DuckDB puts it last)."""
    left, right = node.this, node.expression
    if isinstance(node, _ORDERINGS) and "ARRAY" in (_array_kind(left), _array_kind(right)):
        for key, side in (("this", left), ("expression", right)):
            node.set(key, duck(null_elements_first(sql_of(side))))
        return typed(node, "BOOLEAN")
    for this, other, key in ((left, right, "expression"), (right, left, "this")):
        if kind(this) == "TIMESTAMP" and isinstance(other, exp.Literal) and other.is_string:
            node.set(key, timestamp_literal(sql_timestamp_ms(str(other.this), ctx.zone)))
        elif kind(this) == "DATE" and isinstance(other, exp.Literal) and other.is_string:
            node.set(key, exp.Cast(this=other, to=exp.DataType.build("DATE")))
    return typed(node, "BOOLEAN")


def _array_kind(node: exp.Expr) -> str | None:
    return "ARRAY" if isinstance(node, exp.Array) else kind(node)


def between(node: exp.Expr, ctx: Context) -> exp.Expr:
    if kind(node.this) == "TIMESTAMP":
        for key in ("low", "high"):
            bound = node.args[key]
            if isinstance(bound, exp.Literal) and bound.is_string:
                node.set(key, timestamp_literal(sql_timestamp_ms(str(bound.this), ctx.zone)))
    return typed(node, "BOOLEAN")


def in_list(node: exp.Expr, ctx: Context) -> exp.Expr:
    if kind(node.this) == "TIMESTAMP":
        node.set(
            "expressions",
            [
                timestamp_literal(sql_timestamp_ms(str(v.this), ctx.zone))
                if isinstance(v, exp.Literal) and v.is_string
                else v
                for v in node.expressions
            ],
        )
    return typed(node, "BOOLEAN")


def _divide(node: exp.Expr, ctx: Context) -> exp.Expr:
    return divide(node.this, node.expression)


_CALENDAR_MONTHS = {"MONTH": 1, "QUARTER": 3, "YEAR": 12}


def plus_minus(node: exp.Expr, ctx: Context) -> exp.Expr:
    """`+` and `-`: of two LONGs as Java's longs (past the range it wraps around), of a timestamp
    and an interval on the calendar (`shift_by_interval`); the rest as DuckDB adds."""
    left, right = node.this, node.expression
    if kind(left) == kind(right) == "BIGINT":
        op = "-" if isinstance(node, exp.Sub) else "+"
        return typed(duck(java_long_sum(sql_of(left), op, sql_of(right))), "BIGINT")
    return shift_by_interval(node, ctx)


def shift_by_interval(node: exp.Expr, ctx: Context) -> exp.Expr:
    """`timestamp +/- INTERVAL 'n' MONTH|QUARTER|YEAR` moves on sqlTimeZone's calendar, as Druid's
    timestamp_shift does; day-time intervals are fixed durations, which DuckDB adds as written."""
    left, right = node.this, node.expression
    interval, ts = (right, left) if isinstance(right, exp.Interval) else (left, right)
    if ctx.zone is None or not isinstance(interval, exp.Interval) or kind(ts) != "TIMESTAMP":
        return node
    unit = interval.unit.name.upper().rstrip("S") if interval.unit is not None else ""
    months = _CALENDAR_MONTHS.get(unit)
    if months is None or not isinstance(interval.this, exp.Literal):
        return node
    count = int(str(interval.this.this)) * (-1 if isinstance(node, exp.Sub) else 1)
    return shift_months(ts, ctx, months * count)


def _decimal_literal(node: exp.Expr, ctx: Context) -> exp.Expr:
    """Druid reads `0.1` as a DOUBLE (DuckDB as a DECIMAL, which adds exactly)."""
    assert isinstance(node, exp.Literal)
    if node.is_string or not any(c in str(node.this) for c in ".eE"):
        return node
    return typed(exp.Cast(this=node, to=exp.DataType.build("DOUBLE")), "DOUBLE")


def _nvl(node: exp.Expr, ctx: Context) -> exp.Expr:
    args = [node.this, *node.expressions] if not isinstance(node, exp.Anonymous) else list(node.expressions)
    return typed(exp.Coalesce(this=args[0], expressions=args[1:]), kind(args[0]) or "VARCHAR")


def _reduction(fn: str) -> Rewrite:
    """GREATEST/LEAST: strings when any argument is a string, else doubles when any is one, else
    longs; nulls are ignored (Druid's reduction functions)."""

    def rewrite(node: exp.Expr, ctx: Context) -> exp.Expr:
        args = [node.this, *node.expressions]
        kinds = {kind(a) for a in args}
        common = "VARCHAR" if "VARCHAR" in kinds else "DOUBLE" if "DOUBLE" in kinds else "BIGINT"
        if kinds <= {common, None}:
            return node
        listed = ", ".join(f"CAST({sql_of(a)} AS {common})" for a in args)
        return typed(duck(f"{fn}({listed})"), common)

    return rewrite


OTHER: dict[str, Rewrite] = {
    "GREATEST": _reduction("greatest"),
    "LEAST": _reduction("least"),
    "CAST": cast,
    "NVL": _nvl,
    "/": _divide,
    "=": compare,
    "BETWEEN": between,
    "IN": in_list,
    "+-": plus_minus,
    "LITERAL": _decimal_literal,
}
OPERATOR_KEYS: dict[type[exp.Expr], str] = {
    exp.Div: "/",
    exp.Between: "BETWEEN",
    exp.In: "IN",
    exp.Literal: "LITERAL",
    exp.Add: "+-",
    exp.Sub: "+-",
    **{c: "=" for c in _COMPARISONS},
}

OTHER_SPECS: list[FunctionSpec] = specs(
    "scalar",
    "other",
    {
        "CASE": "Simple and searched CASE.",
        "CAST": "Converts a value to a type, with Druid's rules for timestamps and numbers.",
        "COALESCE": "The first non-null argument.",
        "NVL": "The first argument unless null, else the second.",
        "NULLIF": "Null when both arguments are equal, else the first.",
        "GREATEST": "The largest argument, nulls ignored.",
        "LEAST": "The smallest argument, nulls ignored.",
    },
    native=frozenset({"CASE", "CAST", "COALESCE", "NVL", "NULLIF", "GREATEST", "LEAST"}),
)
