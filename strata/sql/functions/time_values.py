"""Timestamp values in Druid SQL's zone rules: literals read in the statement's zone, ISO 8601
intervals, zone names, and the SQL that turns strings, numbers and dates into DuckDB TIMESTAMPs
and epoch milliseconds. The date and time functions (`strata.sql.functions.time`) build on these.
"""

from __future__ import annotations

import datetime
import re
from zoneinfo import ZoneInfo

import duckdb
import pyarrow as pa
from sqlglot import exp

from strata.query.errors import invalid
from strata.query.expressions.time_functions import from_local
from strata.sql.functions.fragments import duck, kind, number_value, quote, sql_of, typed
from strata.sql.functions.spec import Context
from strata.sql.functions.udfs import create, register, rows
from timeline import Period, format_instant, parse_instant
from timeline.instant import local_to_utc

TIME_PARSE_UDF = "strata_time_parse"  # query.sql_functions: Druid's ISO parsing, in a zone
ZONE_NAME_UDF = "strata_zone_name"
_SQL_TIMESTAMP = re.compile(
    r"^\s*(-?\d{1,4})-(\d{1,2})-(\d{1,2})(?:[ T](\d{1,2})(?::(\d{1,2})(?::(\d{1,2})(?:\.(\d{1,9}))?)?)?)?\s*$"
)


def sql_timestamp_ms(text: str, zone: str | None) -> int:
    """A SQL timestamp literal (`2000-01-01 00:00:00`, ISO 8601 too) read in `zone`, as epoch ms."""
    match = _SQL_TIMESTAMP.match(text)
    if match:
        y, mo, d, h, mi, s, frac = match.groups()
        local = parse_instant(
            f"{int(y):04d}-{int(mo):02d}-{int(d):02d}T{int(h or 0):02d}:{int(mi or 0):02d}:"
            f"{int(s or 0):02d}.{(frac or '0')[:3].ljust(3, '0')}Z"
        )
        return local if zone is None else local_to_utc(local, _zoneinfo(zone))
    try:
        return parse_instant(text.strip(), None if zone is None else _zoneinfo(zone))
    except ValueError:
        raise invalid("Illegal TIMESTAMP literal [%s]", text) from None


def _zoneinfo(zone: str) -> ZoneInfo:
    return ZoneInfo(zone)


def zone_short_name(ms: int, zone: str) -> str:
    """Joda's short zone name at an instant: PST or PDT; a fixed offset prints as -05:00."""
    if zone.startswith("Etc/GMT") and len(zone) > 7:
        hours = -int(zone[7:])  # POSIX signs are inverted
        return f"{'-' if hours < 0 else '+'}{abs(hours):02d}:00"
    if zone in ("UTC", "Etc/UTC"):
        return "UTC"
    moment = datetime.datetime.fromtimestamp(ms / 1000, ZoneInfo(zone))
    return moment.tzname() or zone


def _install(conn: duckdb.DuckDBPyConnection) -> None:
    create(conn, ZONE_NAME_UDF, rows(zone_short_name, pa.string(), 2), ["BIGINT", "VARCHAR"], "VARCHAR")


register(_install)


def timestamp_literal(ms: int) -> exp.Expr:
    """A DuckDB TIMESTAMP constant (UTC) for epoch `ms`."""
    text = format_instant(ms)[:-1].replace("T", " ")
    return typed(duck(f"CAST({quote(text)} AS TIMESTAMP)"), "TIMESTAMP")


def literal_ms(node: exp.Expr, zone: str | None, function: str, what: str) -> int | None:
    """The epoch ms of a constant timestamp argument (a rewritten TIMESTAMP literal, a string or
    a number of milliseconds), None for NULL or absence."""
    if node is None or isinstance(node, exp.Null):
        return None
    if isinstance(node, exp.Cast) and isinstance(node.this, exp.Literal) and node.this.is_string:
        return sql_timestamp_ms(str(node.this.this), None)  # already UTC
    if isinstance(node, exp.Literal) and node.is_string:
        return sql_timestamp_ms(str(node.this), zone)
    value = number_value(node, function, what)
    return int(value)


def as_timestamp(node: exp.Expr, ctx: Context) -> exp.Expr:
    """`node` as a DuckDB TIMESTAMP: strings parse in the zone, numbers are epoch ms, a DATE is
    its midnight in the zone."""
    k = kind(node)
    if k == "VARCHAR":
        if isinstance(node, exp.Literal):
            return timestamp_literal(sql_timestamp_ms(str(node.this), ctx.zone))
        return from_millis(f"{TIME_PARSE_UDF}({sql_of(node)}, {quote(ctx.zone or 'UTC')})")
    if k == "BIGINT" or k == "DOUBLE":
        return from_millis(f"CAST({sql_of(node)} AS BIGINT)")
    if k == "DATE":
        return from_millis(from_local(f"CAST({sql_of(node)} AS TIMESTAMP)", ctx.zone))
    return node


def millis(node: exp.Expr, ctx: Context) -> str:
    """SQL text of the epoch ms of a timestamp argument."""
    return f"epoch_ms({sql_of(as_timestamp(node, ctx))})"


def from_millis(ms_sql: str) -> exp.Expr:
    return typed(duck(f"make_timestamp(CAST({ms_sql} AS BIGINT) * 1000)"), "TIMESTAMP")


def local_time(node: exp.Expr, ctx: Context, zone: str | None) -> str:
    """SQL text of the wall-clock TIMESTAMP of `node` in `zone`."""
    ts = sql_of(as_timestamp(node, ctx))
    if zone is None:
        return ts
    return f"timezone({quote(zone)}, CAST({ts} AS TIMESTAMPTZ))"


def interval_bounds(text: str, zone: str | None) -> tuple[int, int]:
    """An ISO 8601 interval (`start/end`, `start/period`, `period/end`) read in `zone`."""
    first, second = text.split("/")
    tz = None if zone is None else _zoneinfo(zone)
    try:
        if first.startswith("P"):
            end = parse_instant(second, tz)
            return Period.parse(first).add_to(end, tz, times=-1), end
        start = parse_instant(first, tz)
        if second.startswith("P"):
            return start, Period.parse(second).add_to(start, tz)
        return start, parse_instant(second, tz)
    except ValueError:
        raise invalid("Function [TIME_IN_INTERVAL]: invalid interval [%s]", text) from None
