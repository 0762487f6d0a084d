"""The broker's own DuckDB, where the relational part of a statement runs: opened locked down, read
one Arrow batch at a time, its failures told in Druid's words.

A statement reaches DuckDB only after the planner and the function registry took it, but the
database does not rely on that: it has no file, extension or network access
(`enable_external_access=false`, no extension autoloading), its settings are locked before any
statement runs (no `SET`, `PRAGMA` or `RESET` can lift a limit), its memory is one query's
(`EngineLimits.query_memory`) with a bounded spill directory, and its threads are bounded. So a
statement can read nothing but the tables registered for it, on its own cursor, and hold no more
of the broker's memory than its limit. Its answer is read as Arrow record batches of `BATCH_ROWS`,
turned into Druid's values a batch at a time, never into one list of every row.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any
from zoneinfo import ZoneInfo

import duckdb
import orjson
import pyarrow as pa

from strata.query.aggregators.base import non_finite_as_text
from strata.query.duck import EngineLimits
from strata.query.errors import QueryError, QueryInterrupted
from strata.sql.engine_errors import engine_error
from timeline import format_instant

BATCH_ROWS = 4096
"""Rows of one batch read from a statement's answer: one to two hundred kilobytes of JSON."""

Rows = list[list[Any]]


def open_database(limits: EngineLimits, name: str) -> duckdb.DuckDBPyConnection:
    """A database for one statement at a time: Druid's functions installed, UTC, Druid's null
    order, then its configuration locked. Statements run on cursors of it (`conn.cursor()`), whose
    registered tables vanish with them."""
    from strata.sql.functions import install

    if limits.external_access:
        raise ValueError("the broker's engine runs without external access")
    conn = limits.connect(name, scratch=False)
    try:
        conn.execute("SET GLOBAL TimeZone = 'UTC'")
        # Druid orders null below every value: first ascending, last descending
        conn.execute("SET GLOBAL default_null_order = 'nulls_first_on_asc_last_on_desc'")
        install(conn)
        limits.seal(conn)
    except BaseException:
        conn.close()
        raise
    return conn


class ResultBatches:
    """A running statement's answer, read a batch at a time as Druid's values (timestamps printed in
    the statement's zone, DECIMAL as DOUBLE, NaN and the infinities as Druid's JSON spells them) -
    what the broker answered from `fetchall` before."""

    def __init__(self, reader: pa.RecordBatchReader, kinds: list[str], zone: str | None) -> None:
        self._reader = reader
        tz = None if zone is None else ZoneInfo(zone)
        self._converters = [_converter(kind, tz) for kind in kinds]

    def next_batch(self) -> pa.RecordBatch | None:
        try:
            return self._reader.read_next_batch()
        except StopIteration:
            return None

    def rows(self, batch: pa.RecordBatch) -> Rows:
        columns = []
        for column, convert in zip(batch.columns, self._converters, strict=True):
            if pa.types.is_timestamp(column.type):  # epoch ms: a datetime has no year 0 (time_parse('0'))
                values: list[Any] = _epoch_millis(column)
            else:
                values = non_finite_as_text(column, column.to_pylist())
            columns.append(values if convert is None else [None if v is None else convert(v) for v in values])
        return [list(row) for row in zip(*columns, strict=True)]

    def close(self) -> None:
        self._reader.close()


def _converter(kind: str, zone: ZoneInfo | None) -> Callable[[Any], Any] | None:
    if kind.endswith("[]"):  # a list: each element as its type's
        element = _converter(kind[:-2], zone)
        if element is None:
            return None
        return lambda v: [None if e is None else element(e) for e in v]
    base = kind.split("(")[0].upper()
    if base == "JSON":  # a nested value answers as the JSON it holds
        return lambda v: orjson.loads(v) if isinstance(v, str) else v
    if base.startswith("TIMESTAMP"):
        return lambda v: _instant(v, zone)
    if base == "DATE":  # a DATE prints as its midnight in the zone
        return lambda v: format_instant(
            round(datetime.datetime(v.year, v.month, v.day, tzinfo=zone or datetime.UTC).timestamp() * 1000),
            zone,
        )
    if base in ("HUGEINT", "UHUGEINT"):  # Arrow carries them as DECIMAL(38, 0)
        return int
    if base == "DECIMAL":
        return float
    if base == "INTERVAL":  # as DuckDB's own rows give it: a month is 30 days
        return lambda v: datetime.timedelta(days=30 * v.months + v.days, microseconds=v.nanoseconds // 1000)
    return None


_PER_MILLI = {"ms": 1, "us": 1000, "ns": 1_000_000}  # seconds multiply: their own branch


def _epoch_millis(column: pa.Array) -> list[int | None]:
    """A timestamp column's instants as epoch milliseconds (floored, as Druid's times are)."""
    unit = column.type.unit
    ticks = column.cast(pa.int64()).to_pylist()
    if unit == "s":
        return [None if t is None else t * 1000 for t in ticks]
    per = _PER_MILLI[unit]
    return [None if t is None else t // per for t in ticks] if per > 1 else ticks


def _instant(value: Any, zone: ZoneInfo | None) -> Any:
    if isinstance(value, int):
        return format_instant(value, zone)
    if not isinstance(value, datetime.datetime):
        return value
    aware = value if value.tzinfo is not None else value.replace(tzinfo=datetime.UTC)
    return format_instant(round(aware.timestamp() * 1000), zone)


def engine_failure(exc: BaseException, limits: EngineLimits) -> QueryError:
    """A failure of the broker's engine as Druid's error: out of memory names the limits and the
    broker's flags that set them; an interrupt is the statement's timeout or cancel (the caller
    says which). Errors met while streaming come through Arrow, with DuckDB's message."""
    message = str(exc)
    if isinstance(exc, duckdb.OutOfMemoryException) or message.startswith("Out of Memory Error"):
        return limits.exceeded(
            "The relational part of the SQL statement (joins, windows, sorts, set operations) on the broker"
        )
    if isinstance(exc, duckdb.InterruptException) or message.startswith("INTERRUPT Error"):
        return QueryInterrupted("The SQL statement was interrupted")
    return engine_error(exc)
