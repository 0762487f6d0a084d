"""Druid's date and time functions in DuckDB, with Druid's zone rules.

On the DuckDB side a TIMESTAMP is a naive value holding UTC. Functions that work on wall-clock
time (floors, shifts, field extraction, formats) go through epoch milliseconds and the zone's
local time, with the same SQL the native expression engine uses (one definition of Druid's
bucketing, in `timeline`); the zone defaults to the statement's sqlTimeZone, as in Druid.
"""

from __future__ import annotations

from sqlglot import exp

from strata.query.errors import invalid
from strata.query.expressions.time_functions import floor_sql, from_local, shift_sql
from strata.sql.expressions import FLOOR_UNITS
from strata.sql.functions.fragments import (
    duck,
    quote,
    sql_of,
    string_value,
    typed,
    zone_name,
)
from strata.sql.functions.joda import OFFSET, ZONE_NAME, pieces, strptime_format
from strata.sql.functions.spec import Context, FunctionSpec, Rewrite, specs
from strata.sql.functions.time_values import (
    TIME_PARSE_UDF,
    ZONE_NAME_UDF,
    as_timestamp,
    from_millis,
    interval_bounds,
    literal_ms,
    local_time,
    millis,
    timestamp_literal,
)
from timeline import Period

UNIT_PERIODS = {
    **FLOOR_UNITS,
    "MILLISECOND": "PT0.001S",
    "MILLISECONDS": "PT0.001S",
    "DECADE": "P10Y",
    "CENTURY": "P100Y",
    "MILLENNIUM": "P1000Y",
}
_FIXED_MS = {
    "MILLISECOND": 1,
    "SECOND": 1000,
    "MINUTE": 60_000,
    "HOUR": 3_600_000,
    "DAY": 86_400_000,
    "WEEK": 7 * 86_400_000,
}
_MONTHS = {"MONTH": 1, "QUARTER": 3, "YEAR": 12}
# TIME_EXTRACT / EXTRACT unit -> DuckDB SQL over the local time `{t}` (Joda's fields)
_EXTRACT = {
    "SECOND": "second({t})",
    "MINUTE": "minute({t})",
    "HOUR": "hour({t})",
    "DAY": "day({t})",
    "DOW": "isodow({t})",
    "ISODOW": "isodow({t})",
    "DOY": "dayofyear({t})",
    "WEEK": "week({t})",
    "MONTH": "month({t})",
    "QUARTER": "quarter({t})",
    "YEAR": "year({t})",
    "ISOYEAR": "isoyear({t})",
    "DECADE": "(year({t}) // 10)",
    "CENTURY": "(year({t}) // 100)",
    "MILLENNIUM": "(year({t}) // 1000)",
    "MILLISECOND": "(millisecond({t}) % 1000)",
}


def _args(node: exp.Expr) -> list[exp.Expr]:
    return list(node.expressions)


def _zone_arg(args: list[exp.Expr], index: int, ctx: Context, function: str) -> str | None:
    if index < len(args) and not isinstance(args[index], exp.Null):
        return zone_name(string_value(args[index], function, "time zone"), function)
    return ctx.zone


def _period(args: list[exp.Expr], index: int, function: str) -> str:
    text = string_value(args[index] if index < len(args) else None, function, "period")
    if text is None:
        raise invalid("Function [%s] needs a period", function)
    try:
        Period.parse(text)
    except ValueError:
        raise invalid("Function [%s]: invalid period [%s]", function, text) from None
    return text


def _arity(function: str, args: list[exp.Expr], low: int, high: int) -> None:
    if not low <= len(args) <= high:
        raise invalid("Function [%s] needs %d to %d arguments, got %d", function, low, high, len(args))


def floor_timestamp(
    node: exp.Expr, ctx: Context, period: str, origin: int | None, zone: str | None
) -> exp.Expr:
    return from_millis(floor_sql(millis(node, ctx), period, origin, zone))


def ceil_timestamp(
    node: exp.Expr, ctx: Context, period: str, origin: int | None, zone: str | None
) -> exp.Expr:
    ms = millis(node, ctx)
    start = floor_sql(ms, period, origin, zone)
    after = shift_sql(start, Period.parse(period), "1", zone)
    return from_millis(f"(CASE WHEN {start} = {ms} THEN {ms} ELSE {after} END)")


def _rounding(function: str, up: bool) -> Rewrite:
    """TIME_FLOOR / TIME_CEIL(timestamp, period[, origin[, zone]])."""

    def rewrite(node: exp.Expr, ctx: Context) -> exp.Expr:
        args = _args(node)
        _arity(function, args, 2, 4)
        origin = literal_ms(args[2], ctx.zone, function, "origin") if len(args) > 2 else None
        zone = _zone_arg(args, 3, ctx, function)
        step = ceil_timestamp if up else floor_timestamp
        return step(args[0], ctx, _period(args, 1, function), origin, zone)

    return rewrite


def _time_shift(node: exp.Expr, ctx: Context) -> exp.Expr:
    args = _args(node)
    _arity("TIME_SHIFT", args, 3, 4)
    period = Period.parse(_period(args, 1, "TIME_SHIFT"))
    zone = _zone_arg(args, 3, ctx, "TIME_SHIFT")
    return from_millis(shift_sql(millis(args[0], ctx), period, sql_of(args[2]), zone))


def extract_sql(node: exp.Expr, ctx: Context, unit: str, zone: str | None, function: str) -> exp.Expr:
    unit = unit.upper()
    if unit == "EPOCH":
        return typed(duck(f"({millis(node, ctx)} // 1000)"), "BIGINT")
    template = _EXTRACT.get(unit)
    if template is None:
        raise invalid("Function [%s]: unknown time unit [%s]", function, unit)
    return typed(duck(f"CAST({template.format(t=local_time(node, ctx, zone))} AS BIGINT)"), "BIGINT")


def _time_extract(node: exp.Expr, ctx: Context) -> exp.Expr:
    args = _args(node)
    _arity("TIME_EXTRACT", args, 2, 3)
    unit = string_value(args[1], "TIME_EXTRACT", "unit") or "MILLISECOND"
    return extract_sql(args[0], ctx, unit, _zone_arg(args, 2, ctx, "TIME_EXTRACT"), "TIME_EXTRACT")


def _extract(node: exp.Expr, ctx: Context) -> exp.Expr:
    return extract_sql(node.expression, ctx, node.this.name, ctx.zone, "EXTRACT")


def format_sql(node: exp.Expr, ctx: Context, pattern: str | None, zone: str | None) -> str:
    local = local_time(node, ctx, zone)
    ms = millis(node, ctx)
    offset = _offset_sql(ms, local)
    if pattern is None:  # ISO 8601 with the zone's offset, as Joda prints it
        return f"(strftime({local}, '%Y-%m-%dT%H:%M:%S.%g') || {offset(':', True)})"
    parts = []
    for piece in pieces(pattern):
        if piece.startswith(OFFSET):
            parts.append(offset(piece[len(OFFSET) :], False))
        elif piece == ZONE_NAME:
            parts.append(f"{ZONE_NAME_UDF}({ms}, {quote(zone or 'UTC')})")
        else:
            parts.append(f"strftime({local}, {quote(piece)})")
    return "(" + " || ".join(parts or ["''"]) + ")"


def _offset_sql(ms: str, local: str):  # type: ignore[no-untyped-def]
    minutes = f"((epoch_ms({local}) - {ms}) // 60000)"

    def text(separator: str, zulu: bool) -> str:
        sign = f"(CASE WHEN {minutes} < 0 THEN '-' ELSE '+' END)"
        hh = f"lpad(CAST(abs({minutes}) // 60 AS VARCHAR), 2, '0')"
        mm = f"lpad(CAST(abs({minutes}) % 60 AS VARCHAR), 2, '0')"
        full = f"{sign} || {hh} || {quote(separator)} || {mm}"
        return f"(CASE WHEN {minutes} = 0 THEN 'Z' ELSE {full} END)" if zulu else f"({full})"

    return text


def _time_format(node: exp.Expr, ctx: Context) -> exp.Expr:
    args = _args(node)
    _arity("TIME_FORMAT", args, 1, 3)
    pattern = string_value(args[1], "TIME_FORMAT", "pattern") if len(args) > 1 else None
    zone = _zone_arg(args, 2, ctx, "TIME_FORMAT")
    return typed(duck(format_sql(args[0], ctx, pattern, zone)), "VARCHAR")


def _time_parse(node: exp.Expr, ctx: Context) -> exp.Expr:
    args = _args(node)
    _arity("TIME_PARSE", args, 1, 3)
    pattern = string_value(args[1], "TIME_PARSE", "pattern") if len(args) > 1 else None
    zone = _zone_arg(args, 2, ctx, "TIME_PARSE")
    text = f"CAST({sql_of(args[0])} AS VARCHAR)"
    if pattern is None:
        return from_millis(f"{TIME_PARSE_UDF}({text}, {quote(zone or 'UTC')})")
    parsed = f"try_strptime({text}, {quote(strptime_format(pattern))})"
    return from_millis(from_local(parsed, zone))


def _time_in_interval(node: exp.Expr, ctx: Context) -> exp.Expr:
    args = _args(node)
    _arity("TIME_IN_INTERVAL", args, 2, 2)
    text = string_value(args[1], "TIME_IN_INTERVAL", "interval")
    if text is None or text.count("/") != 1:
        raise invalid("Function [TIME_IN_INTERVAL] needs an ISO 8601 interval, got [%s]", text)
    start, end = interval_bounds(text, ctx.zone)
    ts = sql_of(as_timestamp(args[0], ctx))
    low, high = sql_of(timestamp_literal(start)), sql_of(timestamp_literal(end))
    return typed(duck(f"({ts} >= {low} AND {ts} < {high})"), "BOOLEAN")


def _millis_to_timestamp(node: exp.Expr, ctx: Context) -> exp.Expr:
    args = _args(node)
    _arity("MILLIS_TO_TIMESTAMP", args, 1, 1)
    return from_millis(sql_of(args[0]))


def _timestamp_to_millis(node: exp.Expr, ctx: Context) -> exp.Expr:
    args = _args(node)
    _arity("TIMESTAMP_TO_MILLIS", args, 1, 1)
    return typed(duck(millis(args[0], ctx)), "BIGINT")


def _unit(node: exp.Expr, function: str) -> str:
    unit = node.args.get("unit")
    name = (unit.name if unit is not None else "").upper().strip("'")
    name = {"SQL_TSI_" + k: k for k in UNIT_PERIODS}.get(name, name)
    if name not in UNIT_PERIODS:
        raise invalid("Function [%s]: unknown time unit [%s]", function, name)
    return name


def _timestamp_add(node: exp.Expr, ctx: Context) -> exp.Expr:
    """Calcite adds day-time units as fixed durations and month units on the zone's calendar."""
    unit = _unit(node, "TIMESTAMPADD")
    ms = millis(node.this, ctx)
    count = sql_of(node.expression)
    if unit in _FIXED_MS:
        return from_millis(f"({ms} + CAST({count} AS BIGINT) * {_FIXED_MS[unit]})")
    if unit not in _MONTHS:
        raise invalid("Function [TIMESTAMPADD]: unit [%s] is not supported", unit)
    return from_millis(shift_sql(ms, Period(months=_MONTHS[unit]), f"CAST({count} AS BIGINT)", ctx.zone))


def shift_months(node: exp.Expr, ctx: Context, months: int) -> exp.Expr:
    """`node` moved by whole months on sqlTimeZone's calendar."""
    return from_millis(shift_sql(millis(node, ctx), Period(months=1), str(months), ctx.zone))


def _timestamp_diff(node: exp.Expr, ctx: Context) -> exp.Expr:
    """Whole units from the first timestamp (`expression`) to the second (`this`)."""
    unit = _unit(node, "TIMESTAMPDIFF")
    start, end = millis(node.expression, ctx), millis(node.this, ctx)
    if unit in _FIXED_MS:
        return typed(duck(f"(({end} - {start}) // {_FIXED_MS[unit]})"), "BIGINT")
    if unit not in _MONTHS:
        raise invalid("Function [TIMESTAMPDIFF]: unit [%s] is not supported", unit)
    a = local_time(node.expression, ctx, ctx.zone)
    b = local_time(node.this, ctx, ctx.zone)
    months = f"((year({b}) - year({a})) * 12 + month({b}) - month({a}))"
    whole = (  # Joda's monthsBetween: a month counts once the day and time are reached
        f"(CASE WHEN {months} > 0 AND {a} + to_months(CAST({months} AS INTEGER)) > {b} THEN {months} - 1"
        f" WHEN {months} < 0 AND {a} + to_months(CAST({months} AS INTEGER)) < {b} THEN {months} + 1"
        f" ELSE {months} END)"
    )
    return typed(duck(f"({whole} // {_MONTHS[unit]})"), "BIGINT")


def _now(ctx: Context) -> exp.Expr:
    if ctx.now_ms is not None:
        return timestamp_literal(ctx.now_ms)
    return typed(duck("CAST(current_timestamp AS TIMESTAMP)"), "TIMESTAMP")


def _current_date(node: exp.Expr, ctx: Context) -> exp.Expr:
    return typed(duck(f"CAST({local_time(_now(ctx), ctx, ctx.zone)} AS DATE)"), "DATE")


def _floor_or_ceil(numeric: str, up: bool) -> Rewrite:
    def rewrite(node: exp.Expr, ctx: Context) -> exp.Expr:
        unit = node.args.get("to")
        if unit is None:
            from strata.sql.functions.numeric import NUMERIC

            return NUMERIC[numeric](node, ctx)
        name = unit.name.upper()
        if name not in UNIT_PERIODS:
            raise invalid("Function [%s]: unknown time unit [%s]", numeric, name)
        step = ceil_timestamp if up else floor_timestamp
        return step(node.this, ctx, UNIT_PERIODS[name], None, ctx.zone)

    return rewrite


def _date_trunc(node: exp.Expr, ctx: Context) -> exp.Expr:
    unit = node.args.get("unit")
    name = (unit.name if unit is not None else "").upper().strip("'")
    name = name[:-1] if name.endswith("S") and name[:-1] in UNIT_PERIODS else name
    if name not in UNIT_PERIODS:
        raise invalid("Function [DATE_TRUNC]: unknown time unit [%s]", name)
    return floor_timestamp(node.this, ctx, UNIT_PERIODS[name], None, ctx.zone)


TIME_REWRITES: dict[str, Rewrite] = {
    "TIME_FLOOR": _rounding("TIME_FLOOR", False),
    "TIME_CEIL": _rounding("TIME_CEIL", True),
    "TIME_SHIFT": _time_shift,
    "TIME_EXTRACT": _time_extract,
    "TIME_FORMAT": _time_format,
    "TIME_PARSE": _time_parse,
    "TIME_IN_INTERVAL": _time_in_interval,
    "MILLIS_TO_TIMESTAMP": _millis_to_timestamp,
    "TIMESTAMP_TO_MILLIS": _timestamp_to_millis,
    "TIMESTAMPADD": _timestamp_add,
    "TIMESTAMPDIFF": _timestamp_diff,
    "CURRENT_TIMESTAMP": lambda node, ctx: _now(ctx),
    "CURRENT_DATE": _current_date,
    "EXTRACT": _extract,
    "DATE_TRUNC": _date_trunc,
    "FLOOR": _floor_or_ceil("FLOOR", False),
    "CEIL": _floor_or_ceil("CEIL", True),
}

TIME_SPECS: list[FunctionSpec] = specs(
    "scalar",
    "date and time",
    {
        "CURRENT_TIMESTAMP": "The statement's start time.",
        "CURRENT_DATE": "The statement's start date in sqlTimeZone.",
        "DATE_TRUNC": "Rounds a timestamp down to a unit (millisecond ... millennium) in sqlTimeZone.",
        "TIME_CEIL": "Rounds a timestamp up to an ISO 8601 period, with optional origin and zone.",
        "TIME_FLOOR": "Rounds a timestamp down to an ISO 8601 period, with optional origin and zone.",
        "TIME_SHIFT": "Shifts a timestamp by a period times a step, on the zone's calendar.",
        "TIME_EXTRACT": "A field (EPOCH, SECOND ... MILLENNIUM) of a timestamp in a zone.",
        "TIME_PARSE": "Parses a string with a Joda pattern (ISO 8601 by default) in a zone.",
        "TIME_FORMAT": "Formats a timestamp with a Joda pattern (ISO 8601 by default) in a zone.",
        "TIME_IN_INTERVAL": "Whether a timestamp is in an ISO 8601 interval (start inclusive).",
        "MILLIS_TO_TIMESTAMP": "Epoch milliseconds as a timestamp.",
        "TIMESTAMP_TO_MILLIS": "A timestamp as epoch milliseconds.",
        "EXTRACT": "EXTRACT(unit FROM timestamp) in sqlTimeZone.",
        "TIMESTAMPADD": "Adds count units to a timestamp (months on the zone's calendar).",
        "TIMESTAMPDIFF": "Whole units between two timestamps (months on the zone's calendar).",
    },
    native=frozenset(
        {
            "CURRENT_TIMESTAMP",
            "DATE_TRUNC",
            "TIME_CEIL",
            "TIME_FLOOR",
            "TIME_SHIFT",
            "TIME_EXTRACT",
            "TIME_PARSE",
            "TIME_FORMAT",
            "MILLIS_TO_TIMESTAMP",
            "TIMESTAMP_TO_MILLIS",
            "EXTRACT",
        }
    ),
)
