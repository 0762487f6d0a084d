"""DuckDB answering Druid SQL the way Druid's documentation says Druid answers it.

Independent of the planner under test: nothing here comes from strata.sql. The raw sample rows
are a DuckDB view per datasource name with Druid's column names and types (`__time` a UTC
TIMESTAMP, every dimension VARCHAR as the tutorial spec ingests them, added/deleted/delta BIGINT).
The Druid semantics the DuckDB text cannot carry by itself live here, each from Druid's docs:

- time zones (sql-query-context `sqlTimeZone`): floors, extracts, formats, DATE casts and
  TIMESTAMP literals work on wall-clock time in the session zone; TIMESTAMP values print as
  ISO 8601 with milliseconds and the zone's offset (`Z` for UTC), DATE as midnight in the zone;
- Joda patterns of TIME_FORMAT and Druid's time units mapped onto DuckDB's;
- results typed by Druid SQL type (BOOLEAN prints true/false, FLOAT compares at float precision).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import duckdb

from tests.historical_query.wiki_http import create_raw

DIMENSIONS = ["channel", "cityName", "comment", "countryIsoCode", "countryName", "isAnonymous", "isMinor",
              "isNew", "isRobot", "isUnpatrolled", "metroCode", "namespace", "page", "regionIsoCode",
              "regionName", "user"]  # fmt: skip
LONGS = ["added", "deleted", "delta"]
# Druid SQL type of each column of the ingested sample (sql-data-types: __time TIMESTAMP, strings
# VARCHAR, longs BIGINT).
COLUMN_TYPES: dict[str, str] = {"__time": "TIMESTAMP", **dict.fromkeys(DIMENSIONS, "VARCHAR"),
                                **dict.fromkeys(LONGS, "BIGINT")}  # fmt: skip


def table_view(name: str) -> str:
    cols = ", ".join(f'"{c}"' for c in [*DIMENSIONS, *LONGS])
    return f'CREATE OR REPLACE VIEW "{name}" AS SELECT t AS "__time", {cols} FROM raw'


# ---- time in the session zone -------------------------------------------------------------------


def local(ts: str, zone: str) -> str:
    """The wall-clock time in `zone` of a UTC instant (DuckDB's session zone is UTC)."""
    return ts if zone == "UTC" else f"timezone('{zone}', ({ts})::TIMESTAMPTZ)"


def instant(wall: str, zone: str) -> str:
    """The UTC instant of a wall-clock time in `zone`."""
    return wall if zone == "UTC" else f"timezone('{zone}', ({wall})::TIMESTAMP)::TIMESTAMP"


def ts_literal(text: str, zone: str) -> str:
    """`TIMESTAMP '2015-09-12 06:00:00'`: Druid reads the literal in the session zone."""
    return instant(f"TIMESTAMP '{text}'", zone)


def floor_to(ts: str, unit: str, zone: str) -> str:
    """FLOOR(ts TO unit): TIME_FLOOR with a one-unit period; minutes and hours are whole units of
    elapsed time, days and longer truncate the wall time (weeks start on Monday, as ISO weeks)."""
    if unit.upper() in ("MINUTE", "HOUR"):
        return time_floor(ts, {"MINUTE": "PT1M", "HOUR": "PT1H"}[unit.upper()], zone)
    return instant(f"date_trunc('{unit.lower()}', {local(ts, zone)})", zone)


PERIOD_MS = {"PT1M": 60_000, "PT15M": 900_000, "PT1H": 3_600_000, "PT6H": 21_600_000, "PT12H": 43_200_000}


def zone_origin_ms(zone: str) -> int:
    """1970-01-01T00:00 on the zone's wall clock: the default origin of a period granularity."""
    return int(datetime(1970, 1, 1, tzinfo=ZoneInfo(zone)).timestamp() * 1000)


def time_floor(ts: str, period: str, zone: str) -> str:
    """TIME_FLOOR(ts, period) as Druid's period granularity (granularities.md): buckets from the
    origin 1970-01-01T00:00 in the zone. Periods of hours and minutes count elapsed time from that
    origin (Joda's duration arithmetic, so in a zone on summer time PT6H buckets start at 01:00,
    07:00... local); days, weeks (Monday) and months truncate the wall-clock date."""
    if period == "P1D":
        return floor_to(ts, "day", zone)
    if period == "P1W":
        return floor_to(ts, "week", zone)
    if period == "P1M":
        return floor_to(ts, "month", zone)
    origin, step = zone_origin_ms(zone), PERIOD_MS[period]
    return f"epoch_ms({origin} + (epoch_ms({ts}) - {origin}) // {step} * {step})"


def time_ceil(ts: str, period: str, zone: str) -> str:
    """CEIL(ts TO unit) / TIME_CEIL(ts, period): the floor, one period on unless already on it."""
    floor = time_floor(ts, period, zone)
    if period in PERIOD_MS:
        return (
            f"CASE WHEN {floor} = {ts} THEN {ts} ELSE {floor} + INTERVAL {PERIOD_MS[period]} MILLISECOND END"
        )
    step = {"P1D": "1 DAY", "P1W": "1 WEEK", "P1M": "1 MONTH"}[period]
    return f"CASE WHEN {floor} = {ts} THEN {ts} ELSE {instant(f'({local(floor, zone)} + INTERVAL {step})', zone)} END"


# TIME_EXTRACT / EXTRACT units (Joda fields) -> DuckDB date parts over the wall time
EXTRACT_UNITS = {"SECOND": "second", "MINUTE": "minute", "HOUR": "hour", "DAY": "day", "DOY": "doy",
                 "WEEK": "week", "MONTH": "month", "QUARTER": "quarter", "YEAR": "year", "DOW": "isodow"}  # fmt: skip


def extract(ts: str, unit: str, zone: str) -> str:
    if unit == "EPOCH":
        return f"(epoch_ms({ts}) // 1000)"
    return f"CAST(date_part('{EXTRACT_UNITS[unit]}', {local(ts, zone)}) AS BIGINT)"


# Joda DateTimeFormat pieces -> strftime (only the ones the generator uses)
JODA = [("yyyy", "%Y"), ("MM", "%m"), ("dd", "%d"), ("HH", "%H"), ("mm", "%M"), ("ss", "%S"),
        ("SSS", "%g"), ("EEE", "%a")]  # fmt: skip


def joda_format(ts: str, pattern: str | None, zone: str) -> str:
    """TIME_FORMAT(ts[, pattern]): no pattern is ISO 8601 with millis and the zone's offset."""
    if pattern is None:
        return f"{ts}"  # typed TIMESTAMP_TEXT: rendered in Python, see render()
    fmt = pattern
    for joda, strf in JODA:
        fmt = fmt.replace(joda, strf)
    fmt = fmt.replace("'T'", "T")
    return f"strftime({local(ts, zone)}, '{fmt}')"


def offset_text(moment: datetime) -> str:
    off = moment.utcoffset()
    assert off is not None
    minutes = int(off.total_seconds()) // 60
    if minutes == 0:
        return "Z"
    sign = "+" if minutes > 0 else "-"
    return f"{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"


def iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}" + offset_text(moment)


def substring(s: str, start: int, length: int) -> str:
    """SUBSTRING(s, start, length): null when start is past the end (Druid's substring, as its
    substring extraction, gives null rather than an empty string there)."""
    return f"CASE WHEN length({s}) >= {start} THEN substring({s}, {start}, {length}) END"


def render(value: Any, sql_type: str, zone: str) -> Any:
    """A DuckDB value as Druid prints a column of `sql_type` in a JSON result."""
    if value is None:
        return None
    if sql_type in ("TIMESTAMP", "TIMESTAMP_TEXT"):
        assert isinstance(value, datetime), (value, sql_type)
        return iso(value.replace(tzinfo=UTC).astimezone(ZoneInfo(zone)))
    if sql_type == "DATE":
        assert isinstance(value, date), (value, sql_type)
        return iso(datetime(value.year, value.month, value.day, tzinfo=ZoneInfo(zone)))
    if sql_type == "BOOLEAN":
        return bool(value)
    if sql_type in ("BIGINT", "INTEGER"):
        return int(value)
    if sql_type in ("DOUBLE", "FLOAT"):
        return float(value)
    if isinstance(value, Decimal):
        return float(value)
    return value


# ---- answers and comparison ---------------------------------------------------------------------


@dataclass
class Table:
    names: list[str]
    rows: list[list[Any]]


class ReferenceOracle:
    """The raw rows in DuckDB (table `raw`), one view per datasource name the statements use."""

    def __init__(self, sample: Path, tables: Sequence[str]):
        self.conn = duckdb.connect()
        self.conn.execute("SET TimeZone='UTC'")
        create_raw(self.conn, sample)
        for name in tables:
            self.conn.execute(table_view(name))

    def answer(self, duck: str, names: list[str], types: list[str], zone: str) -> Table:
        rows = self.conn.execute(duck).fetchall()
        assert all(len(r) == len(types) for r in rows), (duck, types)
        return Table(names, [[render(v, t, zone) for v, t in zip(r, types, strict=True)] for r in rows])


def _key(row: list[Any]) -> str:
    def norm(v: Any) -> Any:
        if isinstance(v, float) and not isinstance(v, bool):
            return None if math.isnan(v) else float(f"{v:.6g}")
        if isinstance(v, int) and not isinstance(v, bool):
            return float(f"{v:.6g}") if abs(v) >= 1 << 53 else float(v)
        return v

    return json.dumps([norm(v) for v in row], default=str)


def _same(want: Any, got: Any, sql_type: str) -> bool:
    if want is None or got is None or isinstance(want, bool) or isinstance(got, bool):
        return want is got if isinstance(want, bool) or isinstance(got, bool) else want == got
    if isinstance(want, (int, float)) and isinstance(got, (int, float)):
        rel = 1e-6 if sql_type == "FLOAT" else 1e-9
        return math.isclose(float(want), float(got), rel_tol=rel, abs_tol=1e-9)
    return bool(want == got)


def difference(want: Table, got: Table, types: list[str], ordered: bool) -> str | None:
    """None when the tables agree; else a short description of the first disagreement."""
    if want.names != got.names:
        return f"column names {got.names}, expected {want.names}"
    if len(want.rows) != len(got.rows):
        return f"{len(got.rows)} rows, expected {len(want.rows)}"
    w_rows = want.rows if ordered else sorted(want.rows, key=_key)
    g_rows = got.rows if ordered else sorted(got.rows, key=_key)
    for i, (w, g) in enumerate(zip(w_rows, g_rows, strict=True)):
        if len(w) != len(g):
            return f"row {i} has {len(g)} values, expected {len(w)}"
        for j, (a, b) in enumerate(zip(w, g, strict=True)):
            if not _same(a, b, types[j]):
                where = "row" if ordered else "sorted row"
                return f"{where} {i} column {want.names[j]}: got {b!r}, expected {a!r}"
    return None
