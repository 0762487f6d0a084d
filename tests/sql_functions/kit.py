"""Running a Druid SQL statement through `to_duckdb` on DuckDB over small tables built here."""

from __future__ import annotations

import datetime
from typing import Any

import duckdb
import sqlglot
from sqlglot.optimizer.annotate_types import annotate_types
from sqlglot.optimizer.qualify import qualify

from strata.sql.dialect import DIALECT
from strata.sql.functions import install, to_duckdb


def run_approximate(sql: str, tables: dict[str, str] | None = None) -> list[tuple[Any, ...]]:
    """`run` with useApproximateCountDistinct (Druid's default)."""
    return run(sql, tables, approximate=True)


def run(
    sql: str,
    tables: dict[str, str] | None = None,
    zone: str | None = None,
    approximate: bool = False,
    annotate_here: bool = True,
) -> list[tuple[Any, ...]]:
    """Rows of `sql`; `tables` maps a name to the DuckDB SELECT building it. The statement is
    typed here as the planner types it, or (`annotate_here=False`) by `to_duckdb` from a schema."""
    conn = duckdb.connect()
    try:
        conn.execute("SET TimeZone='UTC'")
        install(conn)
        for name, select in (tables or {}).items():
            conn.execute(f'CREATE TABLE "{name}" AS {select}')
        schema: dict[str, object] = {
            name: {col: str(kind) for col, kind in zip(*_columns(conn, name), strict=True)}
            for name in tables or {}
        }
        tree = sqlglot.parse_one(sql, dialect=DIALECT)
        if annotate_here:
            tree = annotate_types(
                qualify(tree, schema=schema, dialect=DIALECT), schema=schema, dialect=DIALECT
            )
        tree = to_duckdb(tree, zone, approximate_count_distinct=approximate, schema=schema)  # type: ignore[arg-type]
        return [tuple(_plain(v) for v in row) for row in conn.execute(tree.sql(dialect="duckdb")).fetchall()]
    finally:
        conn.close()


def _columns(conn: duckdb.DuckDBPyConnection, table: str) -> tuple[list[str], list[str]]:
    """The planner's view of a table: its columns and their types."""
    rows = conn.execute(f'DESCRIBE "{table}"').fetchall()
    return [r[0] for r in rows], [r[1] for r in rows]


def _plain(value: Any) -> Any:
    """Timestamps as Druid prints them (ISO 8601, UTC), dates as ISO dates."""
    if isinstance(value, datetime.datetime):
        return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"
    if isinstance(value, datetime.date):
        return value.isoformat()
    return value


def one(sql: str, tables: dict[str, str] | None = None, zone: str | None = None) -> Any:
    rows = run(sql, tables, zone)
    assert len(rows) == 1 and len(rows[0]) == 1, rows
    return rows[0][0]


# the `taxi-trips` rows the examples of Druid's sql-functions.md show
TAXI = {
    "taxi-trips": "SELECT * FROM (VALUES "
    "(TIMESTAMP '2013-08-01 08:14:37', '2013-08-01 09:09:06', 21.25, 76, -73.9377670288086, 1),"
    "(TIMESTAMP '2013-08-01 09:13:00', '2013-08-01 09:20:00', 6.5, 76, NULL, 6)"
    ") t(__time, dropoff_datetime, fare_amount, max_temperature, pickup_longitude, passenger_count)"
}
