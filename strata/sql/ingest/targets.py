"""Where an INSERT or REPLACE writes: PARTITIONED BY's segment granularity and REPLACE's OVERWRITE
intervals, validated with Druid's messages.

PARTITIONED BY takes a time unit keyword (`HOUR`, `DAY`, ...), a granularity name or ISO 8601 period
as a string (`'DAY'`, `'PT1H'`), `TIME_FLOOR(__time, 'PT1H')`, `FLOOR(__time TO DAY)`, or `ALL`
/ `ALL TIME`. OVERWRITE WHERE takes conditions on `__time` only (comparisons with TIMESTAMP
literals, BETWEEN, AND, OR, NOT), read in the statement's `sqlTimeZone`, whose intervals must align
with the granularity.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.tokenizer_core import Token

from strata.query.errors import invalid
from strata.sql.dialect import DIALECT
from strata.sql.filters import TIME, time_bounds
from strata.sql.session import time_zone
from timeline import ETERNITY, MAX_INSTANT, MIN_INSTANT, Granularity, Interval, condense_intervals

PERIODS = {
    "PT1S": "SECOND", "PT1M": "MINUTE", "PT5M": "FIVE_MINUTE", "PT10M": "TEN_MINUTE",
    "PT15M": "FIFTEEN_MINUTE", "PT30M": "THIRTY_MINUTE", "PT1H": "HOUR", "PT6H": "SIX_HOUR",
    "PT8H": "EIGHT_HOUR", "P1D": "DAY", "P1W": "WEEK", "P1M": "MONTH", "P3M": "QUARTER", "P1Y": "YEAR",
}  # fmt: skip
NAMES = tuple(PERIODS.values())
ALL = "ALL"
EXPECTED = (
    "Expected 'SECOND', 'MINUTE', 'FIVE_MINUTE', 'TEN_MINUTE', 'FIFTEEN_MINUTE', 'THIRTY_MINUTE', 'HOUR', "
    "'SIX_HOUR', 'EIGHT_HOUR', 'DAY', 'MONTH', 'QUARTER', 'YEAR', 'ALL', ALL TIME, FLOOR() or TIME_FLOOR()"
)
_ALLOWED = (exp.And, exp.Or, exp.Not, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.Between, exp.Paren, exp.EQ)


def segment_granularity(tokens: Sequence[Token], text: str) -> str:
    """PARTITIONED BY as a granularity name (`DAY`, ...) or `ALL`."""
    words = [t.text.upper() for t in tokens]
    kinds = [t.token_type.name for t in tokens]
    shown = text[tokens[0].start : tokens[-1].end + 1] if tokens else ""
    name: str | None = None
    if words in (["ALL"], ["ALL", "TIME"]):
        name = ALL
    elif len(tokens) == 1 and kinds[0] == "STRING":
        value = tokens[0].text.strip().upper()
        name = ALL if value in ("ALL", "ALL TIME") else PERIODS.get(value, value if value in NAMES else None)
    elif len(tokens) == 1 and words[0] in NAMES:
        name = words[0]
    elif len(tokens) == 6 and words[0] == "TIME_FLOOR" and words[2] == TIME.upper() and kinds[4] == "STRING":
        name = PERIODS.get(tokens[4].text.upper())
    elif len(tokens) == 6 and words[0] == "FLOOR" and words[2] == TIME.upper() and words[3] == "TO":
        name = words[4] if words[4] in NAMES else None
    if name is None:
        raise invalid(
            "Invalid granularity[%s] specified after PARTITIONED BY clause. %s", shown or "''", EXPECTED
        )
    return name


def granularity_of(name: str) -> Granularity:
    return Granularity.parse("all" if name == ALL else name.lower())


def druid_granularity_text(name: str) -> str:
    """The granularity as Druid prints it in messages (Granularity.toString)."""
    if name == ALL:
        return "AllGranularity"
    period = {v: k for k, v in PERIODS.items()}[name]
    return f"{{type=period, period={period}, timeZone=UTC, origin=null}}"


def overwrite_intervals(condition: str, name: str, zone: str | None, now_ms: int) -> list[Interval]:
    """The time chunks OVERWRITE WHERE `condition` replaces, aligned with granularity `name`."""
    try:
        where = sqlglot.parse_one(f"SELECT 1 WHERE {condition}", read=DIALECT).args["where"].this
    except (SqlglotError, KeyError) as e:
        raise invalid("Invalid OVERWRITE WHERE clause [%s]: %s", condition, e) from None
    _check_operators(where, condition)
    with time_zone(zone):
        found = [iv for iv in _intervals(where, condition, now_ms) if iv.end > iv.start]
    if not found:
        raise invalid(
            "The OVERWRITE WHERE clause [%s] produced no time intervals, are the bounds overly restrictive?",
            condition,
        )
    granularity = granularity_of(name)
    for iv in found:
        if not _aligned(iv, granularity, name):
            raise invalid(
                "OVERWRITE WHERE clause identified interval [%s] which is not aligned with PARTITIONED BY "
                "granularity [%s]",
                iv,
                druid_granularity_text(name),
            )
    return found


def _intervals(node: exp.Expr, condition: str, now_ms: int) -> list[Interval]:
    """The instants a condition on `__time` keeps, as condensed intervals."""
    node = node.unnest()
    if isinstance(node, (exp.And, exp.Or)):
        left = _intervals(node.this, condition, now_ms)
        right = _intervals(node.expression, condition, now_ms)
        if isinstance(node, exp.Or):
            return list(condense_intervals(left + right))
        return list(condense_intervals([o for a in left for b in right if (o := a.overlap(b)) is not None]))
    if isinstance(node, exp.Not):
        kept, start, out = _intervals(node.this, condition, now_ms), MIN_INSTANT, []
        for iv in kept:
            out.append(Interval(start, iv.start))
            start = iv.end
        return [iv for iv in [*out, Interval(start, MAX_INSTANT)] if iv.end > iv.start]
    bounds = time_bounds(node, now_ms)
    if bounds is None:
        raise invalid(
            "OVERWRITE WHERE clause only supports filtering on the __time column, got [%s]",
            node.sql(dialect=DIALECT),
        )
    if isinstance(bounds, list):
        return bounds
    return [Interval(*bounds)] if bounds[0] < bounds[1] else []


def _check_operators(where: exp.Expr, condition: str) -> None:
    if not isinstance(where, (*_ALLOWED, exp.Predicate)):
        raise invalid(
            "Invalid OVERWRITE WHERE clause [%s]: expected clause including AND, OR, NOT, >, <, >=, <= "
            "OR BETWEEN operators",
            condition,
        )
    for node in where.walk():
        if isinstance(node, exp.Column):
            if node.name != TIME:
                raise invalid(
                    "OVERWRITE WHERE clause only supports filtering on the __time column, got [%s]",
                    node.sql(dialect=DIALECT),
                )
        elif isinstance(node, exp.Predicate) and not isinstance(node, _ALLOWED):
            kind = type(node).__name__.upper()
            raise invalid(
                "Invalid OVERWRITE WHERE clause [%s]: Unsupported operation [%s] in OVERWRITE WHERE clause.",
                condition,
                kind,
            )


def _aligned(iv: Interval, granularity: Granularity, name: str) -> bool:
    if name == ALL:
        return iv.start <= MIN_INSTANT and iv.end >= MAX_INSTANT
    bounds = [b for b in (iv.start, iv.end) if MIN_INSTANT < b < MAX_INSTANT]
    return all(int(granularity.bucket_starts(np.asarray([b], dtype=np.int64))[0]) == b for b in bounds)


def replace_json(intervals: list[Interval] | None) -> list[str] | str:
    """`sqlReplaceTimeChunks` as Druid writes it: "all", or the intervals."""
    if intervals is None or intervals == [ETERNITY]:
        return "all"
    return [str(iv) for iv in intervals]
