"""Spark's pushed filters as Druid native filters, and `__time` comparisons as query intervals.

Spark hands `pushFilters` the conjuncts of a WHERE clause (a top-level AND arrives split; OR is
never offered). Each one this module can express exactly becomes a Druid filter (the pushed ones
are AND-ed) or, on `__time`, a bound of the query's time window, so fewer segments are asked for.
Anything else is returned to Spark, which then filters the rows itself: results stay right
whatever is pushed.

Spark's predicates are three-valued (a comparison with null is unknown, and NOT of unknown is
unknown); `Not` over a comparison therefore also demands the column be non-null, which keeps the
translation exact whatever null semantics the Druid filter has under `not`.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from pyspark.sql.datasource import (
    EqualNullSafe,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    StringContains,
    StringEndsWith,
    StringStartsWith,
)

TIME_COLUMN = "__time"
MIN_MS = -(2**62)  # bounds of the time window when nothing limits it
MAX_MS = 2**62
LIKE_ESCAPE = "\\"

DruidFilter = dict[str, Any]


@dataclass
class Pushed:
    """What the broker is asked: Druid filters (AND-ed) and a `[start, end)` ms window on `__time`."""

    filters: list[DruidFilter] = field(default_factory=list)
    start_ms: int = MIN_MS
    end_ms: int = MAX_MS

    def druid_filter(self) -> DruidFilter | None:
        if not self.filters:
            return None
        return self.filters[0] if len(self.filters) == 1 else {"type": "and", "fields": list(self.filters)}


def push(filters: Iterable[Filter], column_types: Mapping[str, str], pushed: Pushed) -> list[Filter]:
    """Fold what can be pushed into `pushed`; return the rest (the same objects), for Spark."""
    rest: list[Filter] = []
    for f in filters:
        if _column(f) == TIME_COLUMN:
            if not _push_time(f, pushed):
                rest.append(f)
            continue
        translated = translate(f, column_types)
        if translated is None:
            rest.append(f)
        else:
            pushed.filters.append(translated)
    return rest


def translate(f: Filter, column_types: Mapping[str, str]) -> DruidFilter | None:
    """The Druid filter true exactly where Spark's `f` is true, or None when there is none."""
    column = _column(f)
    if column is None or column == TIME_COLUMN or column not in column_types:
        return None
    kind = _match_type(column_types[column])
    if isinstance(f, IsNull):
        return {"type": "null", "column": column}
    if isinstance(f, IsNotNull):
        return {"type": "not", "field": {"type": "null", "column": column}}
    if isinstance(f, Not):
        return _negate(f.child, column, column_types)
    if isinstance(f, EqualNullSafe) and f.value is None:
        return {"type": "null", "column": column}
    if isinstance(f, (StringStartsWith, StringEndsWith, StringContains)):
        if kind != "STRING" or not isinstance(f.value, str):
            return None
        return {"type": "like", "dimension": column, "pattern": _like(f), "escape": LIKE_ESCAPE}
    if isinstance(f, In):
        values = [_value(v, kind) for v in f.value]
        if not values or any(v is None for v in values):
            return None  # IN with a null: SQL's unknown results; leave it to Spark
        return {"type": "in", "dimension": column, "values": values, "matchValueType": kind}
    value = _value(getattr(f, "value", None), kind)
    if value is None:
        return None
    if isinstance(f, (EqualTo, EqualNullSafe)):
        return {"type": "equals", "column": column, "matchValueType": kind, "matchValue": value}
    bound = _RANGES.get(type(f))
    if bound is None:
        return None
    side, strict = bound
    return {
        "type": "range",
        "column": column,
        "matchValueType": kind,
        side: value,
        f"{side}Open": strict,
    }


_RANGES: dict[type, tuple[str, bool]] = {
    GreaterThan: ("lower", True),
    GreaterThanOrEqual: ("lower", False),
    LessThan: ("upper", True),
    LessThanOrEqual: ("upper", False),
}


def _negate(child: Filter, column: str, column_types: Mapping[str, str]) -> DruidFilter | None:
    not_null: DruidFilter = {"type": "not", "field": {"type": "null", "column": column}}
    if isinstance(child, IsNull):
        return not_null
    if isinstance(child, IsNotNull):
        return {"type": "null", "column": column}
    if isinstance(child, Not):
        inner = translate(child.child, column_types)
        return None if inner is None else inner
    if isinstance(child, EqualNullSafe):  # never unknown: NOT (c <=> v) is "c is null or c <> v"
        if child.value is None:
            return not_null
        inner = translate(child, column_types)
        if inner is None:
            return None
        differs = {"type": "and", "fields": [not_null, {"type": "not", "field": inner}]}
        return {"type": "or", "fields": [{"type": "null", "column": column}, differs]}
    inner = translate(child, column_types)
    if inner is None:
        return None
    return {"type": "and", "fields": [not_null, {"type": "not", "field": inner}]}


def _push_time(f: Filter, pushed: Pushed) -> bool:
    """Comparisons on `__time` narrow the window; `IsNotNull(__time)` always holds (never null)."""
    if isinstance(f, IsNotNull):
        return True
    micros = _micros(getattr(f, "value", None))
    if micros is None:
        return False
    floor_ms = micros // 1000
    ceil_ms = -((-micros) // 1000)
    if isinstance(f, GreaterThanOrEqual):
        pushed.start_ms = max(pushed.start_ms, ceil_ms)
    elif isinstance(f, GreaterThan):
        pushed.start_ms = max(pushed.start_ms, floor_ms + 1)
    elif isinstance(f, LessThan):
        pushed.end_ms = min(pushed.end_ms, ceil_ms)
    elif isinstance(f, LessThanOrEqual):
        pushed.end_ms = min(pushed.end_ms, floor_ms + 1)
    elif isinstance(f, (EqualTo, EqualNullSafe)):
        if micros % 1000:  # rows are whole milliseconds: none can equal it
            pushed.end_ms = pushed.start_ms
        else:
            pushed.start_ms = max(pushed.start_ms, floor_ms)
            pushed.end_ms = min(pushed.end_ms, floor_ms + 1)
    else:
        return False
    return True


def _micros(value: Any) -> int | None:
    """Epoch microseconds of a pushed timestamp literal (Spark sends zone-aware datetimes)."""
    if isinstance(value, dt.datetime):
        moment = value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)
        delta = moment - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
        return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    if isinstance(value, dt.date):
        return _micros(dt.datetime(value.year, value.month, value.day, tzinfo=dt.UTC))
    return None


def _column(f: Filter) -> str | None:
    attribute = getattr(f, "attribute", None)
    if attribute is None and isinstance(f, Not):
        return _column(f.child)
    if not attribute or len(attribute) != 1:
        return None  # nested fields do not exist in Druid rows
    return str(attribute[0])


def _match_type(druid_type: str) -> str:
    kind = druid_type.upper()
    return kind if kind in ("LONG", "FLOAT", "DOUBLE") else "STRING"


def _value(value: Any, kind: str) -> Any:
    """The literal as the column's Druid match type, or None when it cannot be compared exactly."""
    if value is None or kind == "FLOAT" or isinstance(value, (dt.date, bytes, bytearray)):
        return None  # FLOAT: Spark's float32 literal and Druid's comparison may round apart
    if kind == "STRING":
        return value if isinstance(value, str) else None
    if isinstance(value, (bool, str)):
        return None
    if isinstance(value, Decimal):
        value = float(value) if kind != "LONG" or value != value.to_integral_value() else int(value)
    if kind == "LONG":
        return value if isinstance(value, int) else None
    if isinstance(value, (int, float)) and math.isfinite(value):
        return float(value)
    return None


def _like(f: Filter) -> str:
    text = str(getattr(f, "value", ""))
    escaped = "".join(LIKE_ESCAPE + ch if ch in "%_\\" else ch for ch in text)
    if isinstance(f, StringStartsWith):
        return escaped + "%"
    if isinstance(f, StringEndsWith):
        return "%" + escaped
    return "%" + escaped + "%"
