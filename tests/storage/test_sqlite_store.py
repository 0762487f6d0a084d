"""What only the SQLite store has: WAL mode, and files written before the schema-version table."""

from __future__ import annotations

import sqlite3

from strata.storage import open_metadata_store

_V1_WITHOUT_LAST_UPDATED = """
CREATE TABLE druid_segments (id TEXT PRIMARY KEY, dataSource TEXT NOT NULL, created_date TEXT NOT NULL,
    start TEXT NOT NULL, "end" TEXT NOT NULL, partitioned INTEGER NOT NULL, version TEXT NOT NULL,
    used INTEGER NOT NULL, payload BLOB NOT NULL);
PRAGMA user_version = 1;
"""


def test_wal_mode(tmp_path):
    open_metadata_store(tmp_path / "m.db").close()
    assert sqlite3.connect(tmp_path / "m.db").execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_a_version_1_file_gains_the_version_table_and_used_status_last_updated(tmp_path):
    conn = sqlite3.connect(tmp_path / "m.db")
    conn.executescript(_V1_WITHOUT_LAST_UPDATED)
    conn.close()
    open_metadata_store(tmp_path / "m.db").close()
    conn = sqlite3.connect(tmp_path / "m.db")
    columns = {r[1] for r in conn.execute("PRAGMA table_info(druid_segments)")}
    assert "used_status_last_updated" in columns
    assert conn.execute("SELECT version FROM strata_schema WHERE component = 'segments'").fetchone() == (2,)
    assert conn.execute("PRAGMA user_version").fetchone() == (2,)
    conn.close()
