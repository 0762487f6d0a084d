"""The segments tables in both dialects: Druid's `druid_segments` layout and, on PostgreSQL, the
change log that lets a node read only what changed since its last read.

Version 1 is the table as the first SQLite store made it. Version 2 makes sure of
`used_status_last_updated` (Druid added it late) and, on PostgreSQL, adds the change tracking:
statement triggers bump a one-row version counter, log which segment ids each statement touched and
`NOTIFY strata_segments` with the new version. The counter row is updated under its row lock, so
versions are handed out in commit order and a reader that sees version v has seen every change
up to v. Triggers catch changes made outside Strata (an operator's UPDATE) too.
"""

from __future__ import annotations

import sqlite3

from strata.storage.schema import Migration

COMPONENT = "segments"
CHANNEL = "strata_segments"
LOG_KEEP = 10_000  # change-log rows kept; a reader further behind reads everything again
LOG_IDS_MAX = 10_000  # a statement touching more ids logs "everything" (NULL) instead of the list

# Column names as Druid's; TEXT rather than Druid's VARCHAR(255), as PostgreSQL stores both alike
# and a long data source name should not fail a publish.
_TABLE = """
CREATE TABLE IF NOT EXISTS druid_segments (
    id TEXT PRIMARY KEY,
    dataSource TEXT NOT NULL,
    created_date TEXT NOT NULL,
    start TEXT NOT NULL,
    "end" TEXT NOT NULL,
    partitioned {boolean} NOT NULL,
    version TEXT NOT NULL,
    used {boolean} NOT NULL,
    payload {blob} NOT NULL,
    used_status_last_updated TEXT
);
"""
_SQLITE_V1 = _TABLE.format(boolean="INTEGER", blob="BLOB") + (
    "CREATE INDEX IF NOT EXISTS idx_druid_segments_datasource_used ON druid_segments (dataSource, used)"
)
_POSTGRES_V1 = _TABLE.format(boolean="BOOLEAN", blob="BYTEA") + (
    "CREATE INDEX IF NOT EXISTS idx_druid_segments_datasource_used_end_start"
    ' ON druid_segments (dataSource, used, "end", start);'
)

_POSTGRES_V2 = f"""
ALTER TABLE druid_segments ADD COLUMN IF NOT EXISTS used_status_last_updated TEXT;
CREATE TABLE IF NOT EXISTS strata_segments_version (
    one BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (one),
    version BIGINT NOT NULL
);
INSERT INTO strata_segments_version (one, version) VALUES (TRUE, 0) ON CONFLICT DO NOTHING;
CREATE TABLE IF NOT EXISTS strata_segment_changes (version BIGINT PRIMARY KEY, ids TEXT[]);
CREATE OR REPLACE FUNCTION strata_segments_changed() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    v BIGINT;
    touched TEXT[];
BEGIN
    IF TG_OP <> 'TRUNCATE' THEN
        SELECT array_agg(id) INTO touched FROM changed_rows;
        IF touched IS NULL THEN
            RETURN NULL;
        END IF;
        IF cardinality(touched) > {LOG_IDS_MAX} THEN
            touched := NULL;
        END IF;
    END IF;
    UPDATE strata_segments_version SET version = version + 1 RETURNING version INTO v;
    INSERT INTO strata_segment_changes (version, ids) VALUES (v, touched);
    DELETE FROM strata_segment_changes WHERE version <= v - {LOG_KEEP};
    PERFORM pg_notify('{CHANNEL}', v::text);
    RETURN NULL;
END
$$;
DROP TRIGGER IF EXISTS strata_segments_inserted ON druid_segments;
DROP TRIGGER IF EXISTS strata_segments_updated ON druid_segments;
DROP TRIGGER IF EXISTS strata_segments_deleted ON druid_segments;
DROP TRIGGER IF EXISTS strata_segments_truncated ON druid_segments;
CREATE TRIGGER strata_segments_inserted AFTER INSERT ON druid_segments
    REFERENCING NEW TABLE AS changed_rows FOR EACH STATEMENT EXECUTE FUNCTION strata_segments_changed();
CREATE TRIGGER strata_segments_updated AFTER UPDATE ON druid_segments
    REFERENCING NEW TABLE AS changed_rows FOR EACH STATEMENT EXECUTE FUNCTION strata_segments_changed();
CREATE TRIGGER strata_segments_deleted AFTER DELETE ON druid_segments
    REFERENCING OLD TABLE AS changed_rows FOR EACH STATEMENT EXECUTE FUNCTION strata_segments_changed();
CREATE TRIGGER strata_segments_truncated AFTER TRUNCATE ON druid_segments
    FOR EACH STATEMENT EXECUTE FUNCTION strata_segments_changed();
"""


def _sqlite_v2(conn: sqlite3.Connection) -> None:
    columns = {row[1] for row in conn.execute("PRAGMA table_info(druid_segments)")}
    if "used_status_last_updated" not in columns:
        conn.execute("ALTER TABLE druid_segments ADD COLUMN used_status_last_updated TEXT")


MIGRATIONS = (
    Migration(1, sqlite=_SQLITE_V1, postgresql=_POSTGRES_V1),
    Migration(2, sqlite=_sqlite_v2, postgresql=_POSTGRES_V2),
)
SCHEMA_VERSION = len(MIGRATIONS)
