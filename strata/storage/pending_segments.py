"""Segments still being built by real-time nodes (Druid's `druid_pendingSegments`), so a compaction
never replaces a time chunk under data that is not published yet.

A real-time node registers a bucket's segment (its interval and version) before it acknowledges
the bucket's first rows, and its handoff publish removes the row in the publish's own transaction.
A compaction's publish refuses, in its transaction, to replace an interval where a pending segment
of an older version lies (its rows would be hidden under the compacted version the moment they
are handed off, and at once from queries of the live segment). A bucket whose version would be
older than a used segment already covering it is re-versioned before it takes any row.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from strata.storage.metadata_store import MetadataStore, TransactionGuard
from strata.storage.schema import Migration, statements
from strata.storage.task_store import now_iso
from timeline import DataSegment, Interval

PENDING_COMPONENT = "pending_segments"
_TABLE = """
CREATE TABLE IF NOT EXISTS druid_pendingSegments (
    id TEXT PRIMARY KEY,
    dataSource TEXT NOT NULL,
    created_date TEXT NOT NULL,
    version TEXT NOT NULL,
    allocator TEXT NOT NULL,
    payload {blob} NOT NULL
);
CREATE INDEX IF NOT EXISTS idx_druid_pendingsegments_datasource ON druid_pendingSegments (dataSource)
"""


PENDING_MIGRATIONS = (
    Migration(1, sqlite=_TABLE.format(blob="BLOB"), postgresql=statements(_TABLE.format(blob="BYTEA"))),
)


def used_overlapping(conn: Any, dialect: str, data_source: str, interval: Interval) -> list[DataSegment]:
    """The used segments of `data_source` overlapping `interval`, as the caller's transaction sees them."""
    mark = "%s" if dialect == "postgresql" else "?"
    used = True if dialect == "postgresql" else 1
    sql = f"SELECT payload FROM druid_segments WHERE used = {mark} AND dataSource = {mark}"
    rows = conn.execute(sql, (used, data_source)).fetchall()
    segments = (DataSegment.from_json(orjson.loads(bytes(p))) for (p,) in rows)
    return [s for s in segments if s.interval.overlaps(interval)]


class PendingSegments:
    def __init__(self, metadata: MetadataStore) -> None:
        self._meta = metadata
        self._dialect = metadata.dialect
        self._mark = "%s" if metadata.dialect == "postgresql" else "?"
        metadata.migrate(PENDING_COMPONENT, PENDING_MIGRATIONS)

    def register(self, segment: DataSegment, allocator: str) -> str | None:
        """Record a bucket's segment as pending for `allocator` (the node building it); None when
        done, else the version of a used segment already covering part of its interval with an
        equal or newer version (nothing recorded: the bucket must take a newer version first)."""
        m = self._mark
        with self._meta.transaction() as conn:
            newer = [
                s.version
                for s in used_overlapping(conn, self._dialect, segment.data_source, segment.interval)
                if s.version >= segment.version
            ]
            if newer:
                return max(newer)
            if conn.execute(f"SELECT 1 FROM druid_pendingSegments WHERE id = {m}", (segment.id,)).fetchone():
                return None
            payload = orjson.dumps(segment.to_json())
            conn.execute(
                "INSERT INTO druid_pendingSegments (id, dataSource, created_date, version, allocator,"
                f" payload) VALUES ({m}, {m}, {m}, {m}, {m}, {m})",
                (segment.id, segment.data_source, now_iso(), segment.version, allocator, payload),
            )
        return None

    def remove(self, segment_ids: Sequence[str]) -> None:
        with self._meta.transaction() as conn:
            self.removed_on_publish(segment_ids)(conn)

    def of_allocator(self, data_source: str, allocator: str) -> list[str]:
        """The ids `allocator` has pending for `data_source` (a restarted node forgets the stale ones)."""
        m = self._mark
        with self._meta.transaction() as conn:
            sql = f"SELECT id FROM druid_pendingSegments WHERE dataSource = {m} AND allocator = {m}"
            return [r[0] for r in conn.execute(sql, (data_source, allocator)).fetchall()]

    def removed_on_publish(self, segment_ids: Sequence[str]) -> TransactionGuard:
        """A publish guard that deletes these pending rows in the publish's transaction."""
        m = self._mark

        def guard(conn: Any) -> None:
            for sid in segment_ids:
                conn.execute(f"DELETE FROM druid_pendingSegments WHERE id = {m}", (sid,))

        return guard

    def overlapping(self, data_source: str, interval: Interval, conn: Any = None) -> list[DataSegment]:
        """Pending segments of `data_source` overlapping `interval` (in `conn`'s transaction if given)."""
        if conn is None:
            with self._meta.transaction() as own:
                return self.overlapping(data_source, interval, own)
        sql = f"SELECT payload FROM druid_pendingSegments WHERE dataSource = {self._mark}"
        rows = conn.execute(sql, (data_source,)).fetchall()
        segments = (DataSegment.from_json(orjson.loads(bytes(p))) for (p,) in rows)
        return [s for s in segments if s.interval.overlaps(interval)]
