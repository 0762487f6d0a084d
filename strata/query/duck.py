"""DuckDB connections for the per-segment engine: one per worker thread, UTC, bounded threads and
memory.

DuckDB connections must not be shared between threads; the engine runs in a worker pool so each
worker keeps its own connection (cheap to reuse, costly to create per query). A worker runs one
query at a time, so a connection's memory limit is one query's, and the pool's size times it the
process's (`EngineLimits`, set once at start-up by `configure`).
"""

from __future__ import annotations

import contextlib
import os
import threading
import warnings
from dataclasses import dataclass
from typing import Any

import duckdb
import pyarrow as pa

from strata.query.errors import ResourceLimitExceeded

_local = threading.local()
THREADS = int(os.environ.get("STRATA_DUCKDB_THREADS", "0")) or (os.cpu_count() or 2)
MiB = 1 << 20
GiB = 1 << 30


@dataclass(frozen=True)
class EngineLimits:
    """What one process's DuckDB work may use: `query_memory` per query (DuckDB's memory_limit of
    the connection running it), `engine_memory` for all queries at once (so `slots` run together),
    and `spill_bytes` of disk per query where DuckDB can spill; past both it refuses. `work_dir` is
    the process's own directory: spills go under it, scratch files into `scratch_dir`.
    `external_access=False`: no file (but `scratch_dir`), extension or network access, and settings
    locked (the broker's engines, which read only what the broker hands them)."""

    query_memory: int = 512 * MiB
    engine_memory: int = 2 * GiB
    spill_bytes: int = 1 * GiB
    work_dir: str | None = None
    threads: int = THREADS
    external_access: bool = True

    def __post_init__(self) -> None:
        if self.query_memory < 16 * MiB or self.engine_memory < self.query_memory:
            raise ValueError("query memory must be at least 16 MiB and the engine's at least one query's")
        if self.spill_bytes < 0 or self.threads < 1:
            raise ValueError("spill bytes must be >= 0 and threads >= 1")

    @property
    def slots(self) -> int:
        """Queries whose DuckDB work may run at once in this process."""
        return max(1, self.engine_memory // self.query_memory)

    @property
    def spills(self) -> bool:
        return self.work_dir is not None and self.spill_bytes > 0

    @property
    def scratch_dir(self) -> str | None:
        """Where the process's engine may write and read files of its own (None: the system's
        temporary directory, with file access)."""
        return None if self.work_dir is None else os.path.join(self.work_dir, "scratch")

    def exceeded(self, work: str) -> ResourceLimitExceeded:
        """Druid's 400 for `work` that needs more than these limits, naming them and their flags."""
        disk = f" and {_shown(self.spill_bytes)} of disk to spill to (--spill-bytes)"
        return ResourceLimitExceeded(
            f"{work} needs more than the limit of {_shown(self.query_memory)} of memory per query "
            f"(--query-memory){disk if self.spills else ''}. Narrow it: filters, a shorter interval, "
            "fewer columns"
        )

    def connect(self, name: str, *, scratch: bool) -> duckdb.DuckDBPyConnection:
        """A connection under these limits; `name` is its own spill directory under `work_dir`
        (DuckDB makes it when it first spills and removes it on close). Without external access
        its configuration is sealed: call `seal` once it is set up. `scratch`: it may read and
        write `scratch_dir`."""
        config: dict[str, Any] = {"threads": self.threads, "memory_limit": f"{self.query_memory}B"}
        if not self.external_access:
            config.update(autoload_known_extensions=False, autoinstall_known_extensions=False)
        if self.spills:
            assert self.work_dir is not None
            config["temp_directory"] = os.path.join(self.work_dir, name)
            config["max_temp_directory_size"] = f"{self.spill_bytes}B"
        else:
            config["temp_directory"] = ""  # nowhere to spill: past memory_limit a query is refused
        conn = duckdb.connect(config=config)
        if not self.external_access and scratch and self.scratch_dir is not None:
            conn.execute("SET allowed_directories = [" + quote_str(self.scratch_dir + os.sep) + "]")
        return conn

    def seal(self, conn: duckdb.DuckDBPyConnection) -> None:
        """Without external access: no file, extension or network access from now on, and no
        setting may change again (no SET, RESET or PRAGMA lifts a limit)."""
        if not self.external_access:
            conn.execute("SET enable_external_access = false")
            conn.execute("SET allow_community_extensions = false")
            conn.execute("SET lock_configuration = true")


def _shown(n: int) -> str:
    for unit, size in (("GiB", GiB), ("MiB", MiB), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:g} {unit}"
    return f"{n} bytes"


_limits = EngineLimits()


def configure(limits: EngineLimits) -> None:
    """This process's engine limits; connections opened from now on follow them (call at start-up)."""
    global _limits
    _limits = limits


def engine_limits() -> EngineLimits:
    return _limits


def connection() -> duckdb.DuckDBPyConnection:
    conn: duckdb.DuckDBPyConnection | None = getattr(_local, "conn", None)
    if conn is None:
        limits = _limits
        conn = limits.connect(f"thread-{threading.get_ident()}", scratch=True)
        conn.execute("SET TimeZone='UTC'")
        # segment files never change: keep their parsed footers across queries (DuckDB re-reads a
        # footer whose file changed, and trusts none modified in the last 10 seconds)
        conn.execute("SET parquet_metadata_cache = true")
        from strata.query.sketch_functions import install as install_sketch_functions
        from strata.query.sql_functions import install as install_sql_functions

        install_sql_functions(conn)
        install_sketch_functions(conn)
        limits.seal(conn)
        _local.conn = conn
    return conn


def discard_connection() -> None:
    """Drop this thread's connection: a DuckDB internal or fatal error invalidates its database, and
    every later query on it would fail; the next query here opens a fresh one."""
    conn = getattr(_local, "conn", None)
    _local.conn = None
    if conn is not None:
        with contextlib.suppress(duckdb.Error):
            conn.close()


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
