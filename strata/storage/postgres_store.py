"""The cluster metadata store: Druid's `druid_segments` on PostgreSQL (psycopg 3).

- One connection per store, guarded by a lock, opened again by itself after any loss; a read that
  finds its connection dead is retried once on a fresh one, a write is not (it fails with a clear
  `MetadataStoreError` and, being one transaction, leaves nothing behind).
- Publishing takes a transaction-level advisory lock per data source (in name order) before it
  reads what is used, so two publishers of one data source run one after the other and the
  overwrite rule (`plan_publish`) sees the other's commit: one winner, never a mixed set.
- `used_segments` is kept in memory and brought up to date from the change log (segments_schema):
  an unchanged read costs one single-row query; a change costs reading only the segments it
  touched. `subscribe` wakes callers on PostgreSQL NOTIFY, so nobody has to poll to hear of a
  publish.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from typing import Any, TypeVar

import orjson
import psycopg

from strata.storage.metadata_store import (
    MetadataStoreError,
    Replacement,
    SegmentRecord,
    TransactionGuard,
    plan_publish,
)
from strata.storage.metadata_url import redact, scrub
from strata.storage.pg_listener import KEEPALIVES, Listener
from strata.storage.schema import Migration, migrate
from strata.storage.segments_schema import CHANNEL, COMPONENT, MIGRATIONS
from strata.storage.used_set import UsedSet
from timeline import DataSegment, format_instant

log = logging.getLogger(__name__)

T = TypeVar("T")
IDLE_CHECK_S = 1.0  # a connection idle this long is checked before a write goes over it
_MIGRATION_LOCK = 0x5354524154410001  # advisory lock key serialising schema changes ("STRATA" + 1)


def _now() -> str:
    return format_instant(int(datetime.now(UTC).timestamp() * 1000))


def _version(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute("SELECT version FROM strata_segments_version").fetchone()
    return int(row[0]) if row else 0


class PostgresMetadataStore:
    """`MetadataStore` on PostgreSQL; safe to share between threads."""

    dialect = "postgresql"

    def __init__(self, url: str, *, connect_timeout_s: float = 5.0, application_name: str = "strata"):
        self._url = url
        self.location = redact(url)
        self._connect_args: dict[str, Any] = {
            # autocommit: every transaction is an explicit `conn.transaction()` block (BEGIN..COMMIT);
            # otherwise a lone statement (the idle check) would open one that a later block only
            # nests a savepoint in, and nothing would ever commit
            "autocommit": True,
            "connect_timeout": max(1, round(connect_timeout_s)), "application_name": application_name,
            **KEEPALIVES,
        }  # fmt: skip
        self._lock = threading.RLock()
        self._conn: psycopg.Connection[Any] | None = None
        self._last_used = 0.0
        self._memo: UsedSet | None = None  # the used segments as of `_memo_version`
        self._memo_version = -1
        self._subscribers: list[Callable[[], None]] = []
        self._listener: Listener | None = None
        self._subscribe_lock = threading.Lock()  # apart from `_lock`, which a slow query may hold
        try:
            self.migrate(COMPONENT, MIGRATIONS)
        except BaseException:
            self._drop()
            raise

    # -- connections and transactions --------------------------------------------------------------
    def _error(self, e: BaseException, doing: str) -> MetadataStoreError:
        return MetadataStoreError(
            f"metadata store {self.location}: {doing} failed: {scrub(str(e).strip(), self._url)}"
        )

    def _connection(self, *, check: bool) -> psycopg.Connection[Any]:
        conn = self._conn
        if conn is not None and (conn.closed or conn.broken):
            conn = self._conn = None
        if conn is not None and check and time.monotonic() - self._last_used > IDLE_CHECK_S:
            try:
                conn.execute("SELECT 1")
            except psycopg.OperationalError:
                self._drop()
                conn = None
        if conn is None:
            try:
                conn = self._conn = psycopg.connect(self._url, **self._connect_args)
            except psycopg.Error as e:
                detail = scrub(str(e).strip().removeprefix("connection failed: "), self._url)
                raise MetadataStoreError(f"metadata store {self.location} is unreachable: {detail}") from None
        return conn

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with suppress(psycopg.Error):
                conn.close()

    def _run(
        self, work: Callable[[psycopg.Connection[Any]], T], *, doing: str, write: bool, block: bool = True
    ) -> T:
        """`work` in one transaction (`block=False`: a single statement, committed by itself); a read
        meeting a dead connection is retried once afresh."""
        with self._lock:
            for attempt in (1, 2):
                conn = self._connection(check=write)
                try:
                    if block:
                        with conn.transaction():
                            result = work(conn)
                    else:
                        result = work(conn)
                    self._last_used = time.monotonic()
                    return result
                except psycopg.OperationalError as e:
                    self._drop()
                    if write or attempt == 2:
                        raise self._error(e, doing) from None
                    log.info("metadata store %s: connection lost, reading again", self.location)
                except psycopg.errors.UniqueViolation as e:
                    detail = scrub(str(e).strip(), self._url)
                    raise MetadataStoreError(
                        f"a segment with one of these ids is already published: {detail}"
                    ) from None
                except psycopg.Error as e:
                    raise self._error(e, doing) from None
            raise AssertionError("unreachable")

    def migrate(self, component: str, migrations: Sequence[Migration]) -> int:
        """Create or upgrade a component's tables (see storage.schema); concurrent openers wait."""

        def work(conn: psycopg.Connection[Any]) -> int:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
            return migrate(conn, "postgresql", component, migrations, where=self.location)

        return self._run(work, doing=f"creating the {component} tables", write=True)

    @contextmanager
    def transaction(self) -> Iterator[psycopg.Connection[Any]]:
        """A DB-API connection inside one transaction, for another module's tables."""
        with self._lock:
            conn = self._connection(check=True)
            try:
                with conn.transaction():
                    yield conn
                self._last_used = time.monotonic()
            except psycopg.OperationalError as e:
                self._drop()
                raise self._error(e, "a transaction") from None

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

        def work(conn: psycopg.Connection[Any]) -> None:
            sources = sorted({s.data_source for s in segments} | {r.data_source for r in [replace] if r})
            for ds in sources:  # in name order, so two multi-source publishers cannot deadlock
                conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (f"strata:{ds}",))
            if guard is not None:  # after the locks: it sees every earlier publish of these sources
                guard(conn)
            used = self._read_used(conn, sources) if overwrite or replace else []
            plan = plan_publish(segments, used, overwrite=overwrite, replace=replace)
            if plan.stale:
                conn.execute(
                    "UPDATE druid_segments SET used = FALSE, used_status_last_updated = %s"
                    " WHERE id = ANY(%s) AND used",
                    (now, plan.stale),
                )
            if not segments:
                return
            conn.execute(
                'INSERT INTO druid_segments (id, dataSource, created_date, start, "end", partitioned,'
                " version, used, payload, used_status_last_updated)"
                " SELECT * FROM unnest(%s::text[], %s::text[], %s::text[], %s::text[], %s::text[],"
                " %s::boolean[], %s::text[], %s::boolean[], %s::bytea[], %s::text[])",
                (
                    [s.id for s in segments], [s.data_source for s in segments], [now] * len(segments),
                    [format_instant(s.interval.start) for s in segments],
                    [format_instant(s.interval.end) for s in segments],
                    [s.shard_spec.type != "none" for s in segments], [s.version for s in segments],
                    [s.id not in plan.lost for s in segments],
                    [orjson.dumps(s.to_json()) for s in segments], [now] * len(segments),
                ),
            )  # fmt: skip

        self._run(work, doing="publishing segments", write=True)

    def _set_used(self, ids: Iterable[str], used: bool) -> int:
        wanted = list(ids)
        now = _now()

        def work(conn: psycopg.Connection[Any]) -> int:
            cur = conn.execute(
                "UPDATE druid_segments SET used = %s, used_status_last_updated = %s"
                " WHERE id = ANY(%s) AND used <> %s",
                (used, now, wanted, used),
            )
            return cur.rowcount

        return self._run(
            work, doing="marking segments used" if used else "marking segments unused", write=True
        )

    def mark_unused(self, ids: Iterable[str]) -> int:
        return self._set_used(ids, False)

    def mark_used(self, ids: Iterable[str]) -> int:
        return self._set_used(ids, True)

    def delete_unused(self, ids: Iterable[str], *, guard: TransactionGuard | None = None) -> int:
        wanted = list(ids)

        def work(conn: psycopg.Connection[Any]) -> int:
            if guard is not None:
                guard(conn)
            cur = conn.execute("DELETE FROM druid_segments WHERE id = ANY(%s) AND NOT used", (wanted,))
            return cur.rowcount

        return self._run(work, doing="deleting unused segments", write=True)

    # -- reads -------------------------------------------------------------------------------------
    @staticmethod
    def _read_used(conn: psycopg.Connection[Any], sources: list[str] | None) -> list[DataSegment]:
        if sources is None:
            rows = conn.execute("SELECT payload FROM druid_segments WHERE used").fetchall()
        else:
            rows = conn.execute(
                "SELECT payload FROM druid_segments WHERE used AND dataSource = ANY(%s)", (sources,)
            ).fetchall()
        return [DataSegment.from_json(orjson.loads(p)) for (p,) in rows]

    def _refresh(self, conn: psycopg.Connection[Any]) -> None:
        """Bring the remembered used segments to the newest version, reading only what changed."""
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        version = _version(conn)
        if version == self._memo_version and self._memo is not None:
            return
        changes: list[tuple[int, list[str] | None]] = []
        if self._memo is not None:
            changes = conn.execute(
                "SELECT version, ids FROM strata_segment_changes WHERE version > %s ORDER BY version",
                (self._memo_version,),
            ).fetchall()
        complete = (
            self._memo is not None and len(changes) == version - self._memo_version
            and all(ids is not None for _, ids in changes)
        )  # fmt: skip
        if not complete:
            self._memo = UsedSet(self._read_used(conn, None))
        else:
            assert self._memo is not None
            touched = sorted({i for _, ids in changes for i in ids or ()})
            rows = conn.execute(
                "SELECT payload FROM druid_segments WHERE used AND id = ANY(%s)", (touched,)
            ).fetchall()
            self._memo.apply(touched, (DataSegment.from_json(orjson.loads(p)) for (p,) in rows))
        self._memo_version = version

    def used_segments(self, data_source: str | None = None) -> list[DataSegment]:
        with self._lock:
            # one round trip while nothing changed: versions are given out in commit order, so the
            # counter alone says whether anything committed since the last read
            version = self._run(_version, doing="reading used segments", write=False, block=False)
            if version != self._memo_version or self._memo is None:
                self._run(self._refresh, doing="reading used segments", write=False)
            assert self._memo is not None
            return self._memo.listed(data_source)

    def segments(self, data_source: str | None = None, include_unused: bool = False) -> list[SegmentRecord]:
        sql = "SELECT payload, used, created_date FROM druid_segments WHERE TRUE"
        args: list[str] = []
        if not include_unused:
            sql += " AND used"
        if data_source is not None:
            sql += " AND dataSource = %s"
            args.append(data_source)

        def work(conn: psycopg.Connection[Any]) -> list[tuple[bytes, bool, str]]:
            return conn.execute(sql + " ORDER BY dataSource, start, version, id", args).fetchall()

        rows = self._run(work, doing="listing segments", write=False)
        return [SegmentRecord(DataSegment.from_json(orjson.loads(p)), bool(u), c) for p, u, c in rows]

    def data_sources(self) -> list[str]:
        def work(conn: psycopg.Connection[Any]) -> list[str]:
            rows = conn.execute(
                "SELECT DISTINCT dataSource FROM druid_segments WHERE used ORDER BY dataSource"
            ).fetchall()
            return [r[0] for r in rows]

        return self._run(work, doing="listing data sources", write=False)

    # -- notifications -----------------------------------------------------------------------------
    def subscribe(self, callback: Callable[[], None]) -> None:
        """Call `callback` (from another thread) soon after any change to the segments, and after
        the notification connection is lost and back, when changes may have been missed. Returns at
        once (the listening connection is made in its own thread), so an event loop may call it."""
        with self._subscribe_lock:
            self._subscribers.append(callback)
            if self._listener is None:
                self._listener = Listener(self._url, CHANNEL, self._changed)

    def _changed(self) -> None:
        for callback in list(self._subscribers):
            callback()

    def close(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.close()
        with self._lock:
            self._drop()

    def __enter__(self) -> PostgresMetadataStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
