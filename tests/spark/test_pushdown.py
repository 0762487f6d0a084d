"""Spark filters -> Druid filters and `__time` windows (pure; Spark's answers are checked end to end
in test_spark_read.py)."""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

from pyspark.sql.datasource import (
    EqualNullSafe,
    EqualTo,
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

from strata.query.filters import parse_filter
from strata.spark.pushdown import Pushed, push, translate

TYPES = {"__time": "LONG", "page": "STRING", "added": "LONG", "ratio": "DOUBLE", "f": "FLOAT"}
T0 = 1442016000000  # 2015-09-12T00:00:00Z


def test_each_filter_becomes_a_druid_filter_the_engine_parses() -> None:
    cases = [
        EqualTo(("page",), "A"),
        EqualNullSafe(("page",), "A"),
        EqualNullSafe(("page",), None),
        GreaterThan(("added",), 5),
        GreaterThanOrEqual(("ratio",), 0.5),
        LessThan(("added",), 5),
        LessThanOrEqual(("ratio",), 2),
        In(("page",), ("a", "b")),
        IsNull(("page",)),
        IsNotNull(("added",)),
        Not(EqualTo(("page",), "A")),
        Not(EqualNullSafe(("page",), "A")),
        Not(In(("added",), (1, 2))),
        Not(IsNull(("page",))),
        StringStartsWith(("page",), "50%_off\\"),
        StringEndsWith(("page",), "x"),
        StringContains(("page",), "y"),
    ]
    for f in cases:
        druid = translate(f, TYPES)
        assert druid is not None, f
        parse_filter(druid)  # the broker accepts it


def test_shapes() -> None:
    assert translate(EqualTo(("added",), 3), TYPES) == {
        "type": "equals", "column": "added", "matchValueType": "LONG", "matchValue": 3,
    }  # fmt: skip
    assert translate(GreaterThan(("ratio",), 1), TYPES) == {
        "type": "range", "column": "ratio", "matchValueType": "DOUBLE", "lower": 1.0, "lowerOpen": True,
    }  # fmt: skip
    like = translate(StringStartsWith(("page",), "50%_"), TYPES)
    assert like == {"type": "like", "dimension": "page", "pattern": "50\\%\\_%", "escape": "\\"}
    # NOT of a comparison is false on null, whatever Druid's `not` does with nulls
    assert translate(Not(EqualTo(("page",), "A")), TYPES) == {
        "type": "and",
        "fields": [
            {"type": "not", "field": {"type": "null", "column": "page"}},
            {
                "type": "not",
                "field": {"type": "equals", "column": "page", "matchValueType": "STRING", "matchValue": "A"},
            },
        ],
    }


def test_what_is_left_to_spark() -> None:
    left = [
        EqualTo(("f",), 1.5),  # FLOAT: float32 rounding
        In(("page",), ("a", None)),  # IN with null
        EqualTo(("page",), 3),  # mistyped literal
        EqualTo(("added",), "3"),
        EqualTo(("nested", "x"), 1),
        EqualTo(("unknown",), 1),
        StringContains(("added",), "1"),
        In(("__time",), (dt.datetime(2015, 9, 12, tzinfo=dt.UTC),)),
        Not(GreaterThan(("__time",), dt.datetime(2015, 9, 12, tzinfo=dt.UTC))),
    ]
    pushed = Pushed()
    rest = push([*left, EqualTo(("page",), "A")], TYPES, pushed)
    assert rest == left and all(a is b for a, b in zip(rest, left, strict=True))
    assert pushed.druid_filter() == translate(EqualTo(("page",), "A"), TYPES)


def test_time_comparisons_become_a_window_exact_to_the_millisecond() -> None:
    tz = ZoneInfo("America/Los_Angeles")
    at = dt.datetime(2015, 9, 11, 17, 0, 0, 250, tzinfo=tz)  # 2015-09-12T00:00:00.000250Z
    pushed = Pushed()
    assert push([GreaterThanOrEqual(("__time",), at), IsNotNull(("__time",))], TYPES, pushed) == []
    assert pushed.start_ms == T0 + 1  # rows are whole ms: the first at or after .000250 is .001
    pushed = Pushed()
    push([GreaterThan(("__time",), at)], TYPES, pushed)
    assert pushed.start_ms == T0 + 1
    pushed = Pushed()
    push([LessThan(("__time",), at)], TYPES, pushed)
    assert pushed.end_ms == T0 + 1  # T0 itself is before .000250
    pushed = Pushed()
    push([LessThanOrEqual(("__time",), dt.datetime(2015, 9, 12, tzinfo=dt.UTC))], TYPES, pushed)
    assert pushed.end_ms == T0 + 1
    pushed = Pushed()
    push([EqualTo(("__time",), dt.datetime(2015, 9, 12, tzinfo=dt.UTC))], TYPES, pushed)
    assert (pushed.start_ms, pushed.end_ms) == (T0, T0 + 1)
    pushed = Pushed()
    push([EqualTo(("__time",), at)], TYPES, pushed)
    assert pushed.start_ms >= pushed.end_ms  # no row can equal a sub-millisecond instant
