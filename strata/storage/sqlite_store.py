"""The embedded metadata store: one SQLite file in WAL mode, Druid's `druid_segments` schema.

WAL lets readers in other processes go on while one process publishes; every change runs in a
`BEGIN IMMEDIATE` transaction, so two publishers serialize and a reader never sees half a batch.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import orjson

from strata.storage.metadata_store import (
    MetadataStoreError,
    Replacement,
    SegmentRecord,
    TransactionGuard,
    plan_publish,
)
from strata.storage.schema import Migration, migrate
from strata.storage.segments_schema import COMPONENT, MIGRATIONS, SCHEMA_VERSION
from timeline import DataSegment, format_instant


def _now() -> str:
    return format_instant(int(datetime.now(UTC).timestamp() * 1000))


class SQLiteMetadataStore:
    """`MetadataStore` on a SQLite file; safe to share between threads and processes."""

    dialect = "sqlite"

    def __init__(self, path: str | Path, *, busy_timeout_s: float = 30.0):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._conn = sqlite3.connect(
                str(self.path), timeout=busy_timeout_s, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as e:
            raise MetadataStoreError(f"cannot open metadata store {self.path}: {e}") from e
        self._lock = threading.RLock()
        # used segments per data source (None: all), read at `_read_version`; see `used_segments`
        self._used_memo: dict[str | None, list[DataSegment]] = {}
        self._read_version: int | None = None
        try:
            self._init_schema()
        except sqlite3.DatabaseError as e:
            self._conn.close()
            raise MetadataStoreError(f"{self.path} is not a usable metadata store: {e}") from e
        except MetadataStoreError:
            self._conn.close()
            raise

    def _init_schema(self) -> None:
        conn = self._conn
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        with self._transaction():
            # files written before the version table existed kept their version in user_version
            legacy = conn.execute("PRAGMA user_version").fetchone()[0]
            migrate(conn, "sqlite", COMPONENT, MIGRATIONS, where=str(self.path), found=legacy)
            if legacy != SCHEMA_VERSION:  # an older Strata reading user_version refuses this file
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    def migrate(self, component: str, migrations: Sequence[Migration]) -> int:
        """Create or upgrade another module's tables in this database (see storage.schema)."""
        with self._transaction() as conn:
            return migrate(conn, "sqlite", component, migrations, where=str(self.path))

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """A DB-API connection inside one write transaction, for another module's tables."""
        with self._transaction() as conn:
            yield conn

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            finally:  # `data_version` does not move for this connection's own commits
                self._used_memo = {}
            self._conn.execute("COMMIT")

    # -- writes ------------------------------------------------------------------------------------
    def publish(
        self,
        segments: Sequence[DataSegment],
        *,
        overwrite: bool,
        guard: TransactionGuard | None = None,
        replace: Replacement | None = None,
    ) -> None:
        if not segments and replace is None:
            return
        now = _now()
        rows = [
            (
                s.id, s.data_source, now, format_instant(s.interval.start), format_instant(s.interval.end),
                int(s.shard_spec.type != "none"), s.version, orjson.dumps(s.to_json()), now,
            )
            for s in segments
        ]  # fmt: skip
        with self._transaction() as conn:
            if guard is not None:
                guard(conn)
            sources = sorted({s.data_source for s in segments} | {r.data_source for r in [replace] if r})
            used = [seg for ds in sources for seg in self._used(conn, ds)] if overwrite or replace else []
            plan = plan_publish(segments, used, overwrite=overwrite, replace=replace)
            conn.executemany(
                "UPDATE druid_segments SET used = 0, used_status_last_updated = ? WHERE id = ?",
                [(now, i) for i in plan.stale],
            )
            try:
                conn.executemany(
                    'INSERT INTO druid_segments (id, dataSource, created_date, start, "end", partitioned,'
                    " version, used, payload, used_status_last_updated)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [(*r[:7], int(r[0] not in plan.lost), *r[7:]) for r in rows],
                )
            except sqlite3.IntegrityError as e:
                raise MetadataStoreError(f"a segment with one of these ids is already published: {e}") from e

    def _set_used(self, ids: Iterable[str], used: bool) -> int:
        now = _now()
        with self._transaction() as conn:
            cur = conn.executemany(
                "UPDATE druid_segments SET used = ?, used_status_last_updated = ? WHERE id = ? AND used != ?",
                [(int(used), now, i, int(used)) for i in ids],
            )
            return cur.rowcount

    def mark_unused(self, ids: Iterable[str]) -> int:
        return self._set_used(ids, False)

    def mark_used(self, ids: Iterable[str]) -> int:
        return self._set_used(ids, True)

    def delete_unused(self, ids: Iterable[str], *, guard: TransactionGuard | None = None) -> int:
        with self._transaction() as conn:
            if guard is not None:
                guard(conn)
            cur = conn.executemany(
                "DELETE FROM druid_segments WHERE id = ? AND used = 0", [(i,) for i in ids]
            )
            return cur.rowcount

    # -- reads -------------------------------------------------------------------------------------
    @staticmethod
    def _used(conn: sqlite3.Connection, data_source: str | None) -> list[DataSegment]:
        sql = "SELECT payload FROM druid_segments WHERE used = 1"
        args: tuple[str, ...] = ()
        if data_source is not None:
            sql, args = sql + " AND dataSource = ?", (data_source,)
        return [DataSegment.from_json(orjson.loads(p)) for (p,) in conn.execute(sql + " ORDER BY id", args)]

    def used_segments(self, data_source: str | None = None) -> list[DataSegment]:
        """Read and parsed again only after a commit: a historical polls 10,000 unchanged segments
        every few seconds, and parsing them cost it a third of a core at a 1-second period."""
        with self._lock:
            # changes whenever another connection, in any process, commits to the file
            version = self._conn.execute("PRAGMA data_version").fetchone()[0]
            if version != self._read_version:
                self._used_memo, self._read_version = {}, version
            used = self._used_memo.get(data_source)
            if used is None:
                used = self._used_memo[data_source] = self._used(self._conn, data_source)
            return list(used)

    def segments(self, data_source: str | None = None, include_unused: bool = False) -> list[SegmentRecord]:
        sql = "SELECT payload, used, created_date FROM druid_segments WHERE 1 = 1"
        args: list[str] = []
        if not include_unused:
            sql += " AND used = 1"
        if data_source is not None:
            sql += " AND dataSource = ?"
            args.append(data_source)
        with self._lock:
            rows = self._conn.execute(sql + " ORDER BY dataSource, start, version, id", args).fetchall()
        return [SegmentRecord(DataSegment.from_json(orjson.loads(p)), bool(u), c) for p, u, c in rows]

    def data_sources(self) -> list[str]:
        with self._lock:
            rows = self._conn.execute(
                "SELECT DISTINCT dataSource FROM druid_segments WHERE used = 1 ORDER BY dataSource"
            ).fetchall()
        return [r[0] for r in rows]

    def subscribe(self, callback: Callable[[], None]) -> None:
        """SQLite has no notifications: readers poll (`used_segments` is cheap while unchanged)."""

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> SQLiteMetadataStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
