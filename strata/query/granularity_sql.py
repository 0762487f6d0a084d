"""Query granularity in the engine: parsing with Druid errors, and bucketing `__time` in SQL.

Fixed UTC durations (minute, hour, day without a zone, `duration` granularities, ...) bucket with
integer arithmetic inside DuckDB. Calendar or zoned granularities (month, week in a zone,
`PT1H` in America/Los_Angeles, ...) bucket through a vectorised Arrow UDF that calls the
timeline package's `bucket_starts`, so there is one definition of Druid's bucketing rules.
"""

from __future__ import annotations

import hashlib
from typing import Any

import duckdb
import numpy as np
import orjson
import pyarrow as pa
from duckdb.func import ARROW

from strata.query.columns import TIME_COLUMN
from strata.query.errors import invalid
from timeline import Granularity, parse_granularity
from timeline.granularity import DurationGranularity, PeriodGranularity
from timeline.instant import local_to_utc


def parse_query_granularity(value: Any) -> Granularity:
    """A query's `granularity` (default `all`); a bad one is an InvalidInput naming it."""
    if value is None:
        value = "all"
    try:
        return parse_granularity(value)
    except (ValueError, TypeError, KeyError) as e:
        shown = value if isinstance(value, str) else orjson.dumps(value, default=str).decode()
        raise invalid("Invalid granularity [%s]: %s", shown, e) from None


def fixed_step(gran: Granularity) -> tuple[int, int] | None:
    """(size, origin) when every bucket is an exact UTC duration counted from an origin."""
    if isinstance(gran, DurationGranularity):
        return gran.duration_ms, gran.origin
    if not isinstance(gran, PeriodGranularity):
        return None
    p = gran.period
    fields = p.nonzero_fields()
    if len(fields) != 1:
        return None
    if p.calendar_free:
        if fields == ["hours"] and p.hours == 1 and gran.origin is None and gran.tz is not None:
            return None  # wall-clock hour in a zone: follows the zone's offsets
        origin = (
            gran.origin if gran.origin is not None else (0 if gran.tz is None else local_to_utc(0, gran.tz))
        )
        return p.exact_ms, origin
    if gran.tz is None and gran.origin is None and p.days + p.weeks == 1:
        day = 86_400_000
        return (day, 0) if p.days else (7 * day, 4 * day)  # 1970-01-05 was a Monday
    return None


def bucket_sql(gran: Granularity, conn: duckdb.DuckDBPyConnection, column: str = TIME_COLUMN) -> str:
    """A BIGINT SQL expression giving the bucket start (epoch ms) of `column`.

    For `all` it is a constant 0: callers stamp `all` rows from each segment's cursor window.
    """
    if gran.is_all:
        return "CAST(0 AS BIGINT)"
    if gran.is_none:
        return column
    step = fixed_step(gran)
    if step is not None:
        return step_floor_sql(column, *step)
    return f"{_bucket_function(conn, gran)}({column})"


def step_floor_sql(column: str, size: int, origin: int) -> str:
    """Start of the fixed-size bucket holding `column`, counted from `origin` (all epoch ms)."""
    # floor division that is right for times before the origin too (SQL % keeps the sign)
    return f"({column} - ((({column} - {origin}) % {size}) + {size}) % {size})"


def _bucket_function(conn: duckdb.DuckDBPyConnection, gran: Granularity) -> str:
    key = repr(gran.to_json()).encode()
    name = "strata_bucket_" + hashlib.sha1(key).hexdigest()[:16]

    def starts(times: pa.Array) -> pa.Array:
        values = times.to_numpy(zero_copy_only=False)
        return pa.array(gran.bucket_starts(np.asarray(values, dtype=np.int64)), pa.int64())

    try:
        conn.create_function(name, starts, ["BIGINT"], "BIGINT", type=ARROW, side_effects=False)
    except duckdb.Error as e:  # registered by an earlier query on this connection
        if "already" not in str(e).lower():
            raise
    return name
