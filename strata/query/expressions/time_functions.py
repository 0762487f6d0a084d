"""Druid's timestamp expression functions as DuckDB SQL over epoch milliseconds.

Timestamps are LONG milliseconds, as in Druid. Periods, zones and patterns must be literals (Druid
requires constants there too). Flooring uses the same granularity rules as query granularities
(`timeline`), through integer arithmetic when buckets are fixed UTC steps and the engine's
`strata_time_floor` function otherwise; shifting and field extraction work on the wall-clock time
of the zone, so months, days and DST follow the calendar as Joda's do.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import orjson

from strata.query.duck import quote_str
from strata.query.errors import QueryUnsupported, invalid
from strata.query.expressions.parser import Literal, Node
from strata.query.expressions.typed import LONG, NULL, STRING, Scope, Typed, as_long, as_text
from strata.query.granularity_sql import fixed_step, step_floor_sql
from timeline import Period, format_instant, parse_granularity

TIME_FLOOR_FUNCTION = "strata_time_floor"
TIME_PARSE_FUNCTION = "strata_time_parse"
_UTC_NAMES = ("UTC", "Etc/UTC", "Z", "GMT")


def _literal_arg(name: str, args: tuple[Node, ...], i: int, what: str) -> Any:
    if i >= len(args):
        return None
    node = args[i]
    if not isinstance(node, Literal):
        raise invalid("Function [%s] needs a literal as %s", name, what)
    return node.value


def _zone(name: str, value: Any) -> str | None:
    if value is None or value in _UTC_NAMES:
        return None
    if not isinstance(value, str):
        raise invalid("Function [%s] needs a time zone name as a string", name)
    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError):
        raise invalid("Function [%s]: unknown time zone [%s]", name, value) from None
    return value


def _period(name: str, value: Any) -> Period:
    if not isinstance(value, str):
        raise invalid("Function [%s] needs an ISO-8601 period string", name)
    try:
        return Period.parse(value)
    except ValueError:
        raise invalid("Function [%s]: invalid period [%s]", name, value) from None


def _arity(name: str, args: tuple[Node, ...], low: int, high: int) -> None:
    if not low <= len(args) <= high:
        raise invalid("Function [%s] needs %d to %d arguments, got %d", name, low, high, len(args))


def local_timestamp(millis: str, zone: str | None) -> str:
    """A naive TIMESTAMP holding the wall-clock time of `millis` in `zone` (UTC when None)."""
    if zone is None:
        return f"epoch_ms({millis})"
    return f"timezone({quote_str(zone)}, make_timestamptz(({millis}) * 1000))"


def from_local(local: str, zone: str | None) -> str:
    """Epoch ms of a naive wall-clock TIMESTAMP read in `zone`."""
    if zone is None:
        return f"epoch_ms({local})"
    return f"epoch_ms(timezone({quote_str(zone)}, {local}))"


def floor_sql(millis: str, period: str, origin: Any, zone: str | None) -> str:
    spec: dict[str, Any] = {"type": "period", "period": period}
    if origin is not None:
        spec["origin"] = format_instant(origin) if isinstance(origin, int) else origin
    if zone is not None:
        spec["timeZone"] = zone
    try:
        gran = parse_granularity(spec)
    except (ValueError, TypeError, KeyError) as e:
        raise invalid("Invalid time floor [%s]: %s", period, e) from None
    step = fixed_step(gran)
    if step is not None:
        return step_floor_sql(millis, *step)
    return f"{TIME_FLOOR_FUNCTION}({millis}, {quote_str(orjson.dumps(gran.to_json()).decode())})"


def shift_sql(millis: str, period: Period, step: str, zone: str | None) -> str:
    if period.calendar_free:
        return f"(({millis}) + ({step}) * {period.exact_ms})"
    months = period.years * 12 + period.months
    days = period.weeks * 7 + period.days
    rest = _time_of_day_ms(period)
    parts = []
    if months:
        parts.append(f"to_months(CAST(({step}) * {months} AS INTEGER))")
    if days:
        parts.append(f"to_days(CAST(({step}) * {days} AS INTEGER))")
    if rest:
        parts.append(f"to_milliseconds(({step}) * {rest})")
    return from_local(f"({local_timestamp(millis, zone)} + {' + '.join(parts)})", zone)


def _time_of_day_ms(p: Period) -> int:
    return ((p.hours * 60 + p.minutes) * 60 + p.seconds) * 1000 + p.millis


def _floor(scope: Scope, args: tuple[Node, ...]) -> Typed:
    _arity("timestamp_floor", args, 2, 4)
    millis = as_long(scope.compile(args[0]))
    period = _literal_arg("timestamp_floor", args, 1, "its period")
    _period("timestamp_floor", period)
    origin = _literal_arg("timestamp_floor", args, 2, "its origin")
    zone = _zone("timestamp_floor", _literal_arg("timestamp_floor", args, 3, "its time zone"))
    return Typed(floor_sql(millis, period, origin, zone), LONG)


def _ceil(scope: Scope, args: tuple[Node, ...]) -> Typed:
    _arity("timestamp_ceil", args, 2, 4)
    millis = as_long(scope.compile(args[0]))
    text = _literal_arg("timestamp_ceil", args, 1, "its period")
    period = _period("timestamp_ceil", text)
    origin = _literal_arg("timestamp_ceil", args, 2, "its origin")
    zone = _zone("timestamp_ceil", _literal_arg("timestamp_ceil", args, 3, "its time zone"))
    start = floor_sql(millis, text, origin, zone)
    after = shift_sql(start, period, "1", zone)
    return Typed(f"(CASE WHEN {start} = ({millis}) THEN ({millis}) ELSE {after} END)", LONG)


def _shift(scope: Scope, args: tuple[Node, ...]) -> Typed:
    _arity("timestamp_shift", args, 3, 4)
    millis = as_long(scope.compile(args[0]))
    period = _period("timestamp_shift", _literal_arg("timestamp_shift", args, 1, "its period"))
    step = as_long(scope.compile(args[2]))
    zone = _zone("timestamp_shift", _literal_arg("timestamp_shift", args, 3, "its time zone"))
    return Typed(shift_sql(millis, period, step, zone), LONG)


_UNITS = {
    "SECOND": "second",
    "MINUTE": "minute",
    "HOUR": "hour",
    "DAY": "day",
    "DOW": "isodow",
    "ISODOW": "isodow",
    "DOY": "dayofyear",
    "WEEK": "week",
    "MONTH": "month",
    "QUARTER": "quarter",
    "YEAR": "year",
    "ISOYEAR": "isoyear",
}


def _extract(scope: Scope, args: tuple[Node, ...]) -> Typed:
    _arity("timestamp_extract", args, 2, 3)
    millis = as_long(scope.compile(args[0]))
    unit = _literal_arg("timestamp_extract", args, 1, "its unit")
    if not isinstance(unit, str):
        raise invalid("Function [timestamp_extract] needs a unit name")
    unit = unit.upper()
    zone = _zone("timestamp_extract", _literal_arg("timestamp_extract", args, 2, "its time zone"))
    if unit == "EPOCH":
        return Typed(f"(({millis}) // 1000)", LONG)
    if unit == "MILLISECOND":
        return Typed(f"CAST(millisecond({local_timestamp(millis, zone)}) % 1000 AS BIGINT)", LONG)
    if unit not in _UNITS:
        raise QueryUnsupported(f"timestamp_extract unit [{unit}] is not supported")
    return Typed(f"CAST({_UNITS[unit]}({local_timestamp(millis, zone)}) AS BIGINT)", LONG)


def _format(scope: Scope, args: tuple[Node, ...]) -> Typed:
    _arity("timestamp_format", args, 1, 3)
    from strata.query.extraction_fns import joda_to_strftime

    millis = as_long(scope.compile(args[0]))
    pattern = _literal_arg("timestamp_format", args, 1, "its pattern")
    zone = _zone("timestamp_format", _literal_arg("timestamp_format", args, 2, "its time zone"))
    local = local_timestamp(millis, zone)
    if pattern is None:  # ISO-8601 with the zone's offset, as Joda prints it
        text = f"strftime({local}, '%Y-%m-%dT%H:%M:%S.%g')"
        if zone is None:
            return Typed(f"({text} || 'Z')", STRING)
        return Typed(f"({text} || {_offset_sql(millis, local)})", STRING)
    if not isinstance(pattern, str):
        raise invalid("Function [timestamp_format] needs a pattern string")
    return Typed(f"strftime({local}, {quote_str(joda_to_strftime(pattern))})", STRING)


def _offset_sql(millis: str, local: str) -> str:
    minutes = f"((epoch_ms({local}) - ({millis})) // 60000)"
    sign = f"(CASE WHEN {minutes} < 0 THEN '-' ELSE '+' END)"
    hh = f"lpad(CAST(abs({minutes}) // 60 AS VARCHAR), 2, '0')"
    mm = f"lpad(CAST(abs({minutes}) % 60 AS VARCHAR), 2, '0')"
    return f"(CASE WHEN {minutes} = 0 THEN 'Z' ELSE {sign} || {hh} || ':' || {mm} END)"


def _parse(name: str) -> Callable[[Scope, tuple[Node, ...]], Typed]:
    def compile_(scope: Scope, args: tuple[Node, ...]) -> Typed:
        _arity(name, args, 1, 3)
        value = scope.compile(args[0])
        if value.kind == NULL:
            return Typed("CAST(NULL AS BIGINT)", LONG)
        text = as_text(value)
        pattern = _literal_arg(name, args, 1, "its pattern")
        zone = _zone(name, _literal_arg(name, args, 2, "its time zone"))
        if pattern is None:
            return Typed(f"{TIME_PARSE_FUNCTION}({text}, {quote_str(zone or 'UTC')})", LONG)
        if not isinstance(pattern, str):
            raise invalid("Function [%s] needs a pattern string", name)
        from strata.query.extraction_fns import joda_to_strftime

        parsed = f"try_strptime({text}, {quote_str(joda_to_strftime(pattern))})"
        return Typed(from_local(parsed, zone), LONG)

    return compile_


TIME_FUNCTIONS: dict[str, Callable[[Scope, tuple[Node, ...]], Typed]] = {
    "timestamp_floor": _floor,
    "timestamp_ceil": _ceil,
    "timestamp_shift": _shift,
    "timestamp_extract": _extract,
    "timestamp_format": _format,
    "timestamp_parse": _parse("timestamp_parse"),
    "timestamp": _parse("timestamp"),
}
