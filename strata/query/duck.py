"""DuckDB connections for the per-segment engine: one per worker thread, UTC, bounded threads.

DuckDB connections must not be shared between threads; the engine runs in a worker pool so each
worker keeps its own connection (cheap to reuse, costly to create per query).
"""

from __future__ import annotations

import os
import threading
import warnings

import duckdb
import pyarrow as pa

_local = threading.local()
THREADS = int(os.environ.get("STRATA_DUCKDB_THREADS", "0")) or (os.cpu_count() or 2)


def connection() -> duckdb.DuckDBPyConnection:
    conn: duckdb.DuckDBPyConnection | None = getattr(_local, "conn", None)
    if conn is None:
        conn = duckdb.connect(config={"threads": THREADS})
        conn.execute("SET TimeZone='UTC'")
        # segment files never change: keep their parsed footers across queries (DuckDB re-reads a
        # footer whose file changed, and trusts none modified in the last 10 seconds)
        conn.execute("SET parquet_metadata_cache = true")
        from strata.query import sketch_functions, sql_functions

        sql_functions.install(conn)
        sketch_functions.install(conn)
        _local.conn = conn
    return conn


# `execute(...).to_arrow_table()` warns of one copy of the result rows; it is the cheaper path here
warnings.filterwarnings("ignore", message="Arrow output on a DB-API result", category=UserWarning)


def run_arrow(conn: duckdb.DuckDBPyConnection, sql: str) -> pa.Table:
    """The rows of `sql` as Arrow, the statement parsed and bound once: `conn.sql(sql)` binds it to
    build a relation, then again to run it (~10 ms of a grouping over 50 segment files)."""
    return conn.execute(sql).to_arrow_table()


MULTI_VALUE = "TEXT[]"
"""The DuckDB type of a multi-value STRING column: DuckDB reads it as VARCHAR[], the spelling tells
the query layer it is not an ARRAY<STRING> (which is `VARCHAR[]`). Filters match any of its values,
grouping explodes them, expressions map over them."""


def is_multi_value(duck: str | None) -> bool:
    return duck == MULTI_VALUE


def is_list(duck: str | None) -> bool:
    """An ARRAY or a multi-value STRING column."""
    return duck is not None and duck.endswith("[]")


def is_array(duck: str | None) -> bool:
    """An ARRAY<...> column (grouped and compared as whole values)."""
    return is_list(duck) and duck != MULTI_VALUE


def element_type(duck: str) -> str:
    """The DuckDB type of one value of a list column."""
    return "VARCHAR" if duck == MULTI_VALUE else duck[:-2]


def quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def quote_str(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def query_arrow(conn: duckdb.DuckDBPyConnection, table: pa.Table, name: str, sql: str) -> pa.Table:
    """Run `sql` over an Arrow table visible as `name`; the result as an Arrow table."""
    relation = conn.from_arrow(table).query(name, sql)
    if relation is None:
        raise ValueError("query over an Arrow table returned no relation")
    return relation.to_arrow_table()


def duck_type(t: pa.DataType) -> str:
    """The DuckDB type an Arrow column is read as (segments, partials, results typed for SQL)."""
    if pa.types.is_timestamp(t):
        return "BIGINT"  # __time is exposed as epoch millis
    if pa.types.is_dictionary(t):
        return duck_type(t.value_type)
    if isinstance(t, pa.JsonType):
        return "JSON"
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return f"{duck_type(t.value_type)}[]"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "VARCHAR"
    if pa.types.is_integer(t):
        return "BIGINT"
    if pa.types.is_float32(t):
        return "FLOAT"
    if pa.types.is_floating(t):
        return "DOUBLE"
    if pa.types.is_boolean(t):
        return "BOOLEAN"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return "BLOB"
    return "VARCHAR"
