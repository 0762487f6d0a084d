"""DuckDB for an ingestion step's short queries over Arrow data it registers (a block's column, a
segment's rows): a cursor of one in-memory database per process.

A database of its own for each such query took 20-50 ms to open, most of the time of ingesting a
small dataset with `auto` columns (a few connections per column and segment); a cursor opens in
about a millisecond. Each cursor has its own registrations and session settings, so the threads
of a build can use theirs side by side. After a fork the child opens a database of its own.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import duckdb

_lock = threading.Lock()
_database: dict[int, duckdb.DuckDBPyConnection] = {}  # pid -> this process's database


@contextmanager
def scratch_connection() -> Iterator[duckdb.DuckDBPyConnection]:
    """A connection of its own, closed on exit, that keeps rows in insertion order."""
    with _lock:
        pid = os.getpid()
        if pid not in _database:
            _database.clear()  # a parent's, inherited through a fork: never used here
            database = duckdb.connect()
            database.execute("SET preserve_insertion_order = true")  # the default, and relied on
            _database[pid] = database
        con = _database[pid].cursor()
    try:
        con.execute("SET enable_progress_bar = false")
        yield con
    finally:
        con.close()
