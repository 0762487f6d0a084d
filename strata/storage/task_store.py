"""The coordinator's task queue and interval locks, kept in the metadata store's own database.

One contract on SQLite and PostgreSQL (through `MetadataStore.transaction()`), so tasks, their
locks and the segments they publish live in one database and change together:

- A task's row carries an `attempt` number. Every write a task's process makes (its publish, its
  final status) first checks, in the same transaction, that the row is still active at that
  attempt; a shutdown or a restart of the coordinator bumps it. A process the coordinator gave up
  on can therefore change nothing, even if it is still running.
- `guard()` is what a publish (or a kill's delete) runs first inside its own transaction: the task
  is current, holds unrevoked locks covering every interval it writes, and is marked published in
  that same transaction. Publishing is all or nothing, and at most once per task.
- `grant()` reads the locks held and inserts new ones in one transaction (SQLite's BEGIN
  IMMEDIATE, a PostgreSQL advisory lock per data source); whether a request may be granted is the
  caller's rule (strata.coordinator.locks), decided on what that transaction sees.
On PostgreSQL the task row is read `FOR UPDATE`, so a shutdown and a publish of the same task
run one after the other, never interleaved.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import orjson

from strata.storage.metadata_store import MetadataStore, TransactionGuard
from strata.storage.task_schema import TASK_MIGRATIONS, TASKS_COMPONENT
from timeline import DataSegment, Interval, condense_intervals, format_instant

_COLUMNS = ("id, created_date, datasource, type, group_id, payload, status_payload, active, runner_state,"
            " attempt, published, pid, started_date, report_payload")  # fmt: skip


class TaskExists(ValueError):
    """A task with that id was submitted before."""


class Fenced(RuntimeError):
    """The task was shut down, restarted as a newer attempt, or lost a lock: nothing it asked for
    was changed."""


def now_iso() -> str:
    return format_instant(int(datetime.now(UTC).timestamp() * 1000))


@dataclass(frozen=True)
class TaskRow:
    id: str
    created_date: str
    datasource: str
    type: str
    group_id: str
    payload: dict[str, Any]
    status: dict[str, Any]  # Druid's TaskStatus JSON
    active: bool = True
    runner_state: str = "WAITING"  # WAITING (for locks), PENDING (for a slot), RUNNING, NONE (done)
    attempt: int = 0
    published: bool = False
    pid: int | None = None
    started_date: str | None = None
    report: dict[str, Any] | None = None


@dataclass(frozen=True)
class LockRow:
    id: int
    task_id: str
    payload: dict[str, Any]  # Druid's TaskLock JSON

    @property
    def data_source(self) -> str:
        return str(self.payload.get("dataSource", ""))

    @property
    def interval(self) -> Interval:
        return Interval.parse(str(self.payload["interval"]))


def _json(raw: Any) -> Any:
    return None if raw is None else orjson.loads(bytes(raw))


def _row(r: Sequence[Any]) -> TaskRow:
    return TaskRow(
        id=r[0], created_date=r[1], datasource=r[2], type=r[3] or "", group_id=r[4] or r[0],
        payload=_json(r[5]), status=_json(r[6]), active=bool(r[7]), runner_state=r[8],
        attempt=int(r[9]), published=bool(r[10]), pid=r[11], started_date=r[12], report=_json(r[13]),
    )  # fmt: skip


class TaskStore:
    """Tasks and their locks over a `MetadataStore`'s database; safe to share between threads."""

    def __init__(self, metadata: MetadataStore) -> None:
        self._meta = metadata
        self._pg = metadata.dialect == "postgresql"
        metadata.migrate(TASKS_COMPONENT, TASK_MIGRATIONS)

    @property
    def metadata(self) -> MetadataStore:
        return self._meta

    def _q(self, sql: str) -> str:
        return sql.replace("?", "%s") if self._pg else sql

    def _bool(self, value: bool) -> Any:
        return value if self._pg else int(value)

    @contextmanager
    def _tx(self) -> Iterator[Any]:
        with self._meta.transaction() as conn:
            yield conn

    def _current(self, conn: Any, task_id: str) -> TaskRow | None:
        """The task's row, locked against concurrent changes until the transaction ends."""
        sql = f"SELECT {_COLUMNS} FROM druid_tasks WHERE id = ?" + (" FOR UPDATE" if self._pg else "")
        found = conn.execute(self._q(sql), (task_id,)).fetchone()
        return None if found is None else _row(found)

    # -- tasks -------------------------------------------------------------------------------------
    def insert(self, task: TaskRow) -> None:
        with self._tx() as conn:
            if conn.execute(self._q("SELECT 1 FROM druid_tasks WHERE id = ?"), (task.id,)).fetchone():
                raise TaskExists(f"Task [{task.id}] already exists")
            marks = ", ".join("?" * len(_COLUMNS.split(",")))
            conn.execute(
                self._q(f"INSERT INTO druid_tasks ({_COLUMNS}) VALUES ({marks})"),
                (task.id, task.created_date, task.datasource, task.type, task.group_id,
                 orjson.dumps(task.payload), orjson.dumps(task.status), self._bool(task.active),
                 task.runner_state, task.attempt, self._bool(task.published), task.pid, task.started_date,
                 None if task.report is None else orjson.dumps(task.report)),
            )  # fmt: skip

    def get(self, task_id: str) -> TaskRow | None:
        with self._tx() as conn:
            sql = self._q(f"SELECT {_COLUMNS} FROM druid_tasks WHERE id = ?")
            found = conn.execute(sql, (task_id,)).fetchone()
        return None if found is None else _row(found)

    def tasks(self, *, active: bool | None = None, datasource: str | None = None, limit: int | None = None
              ) -> list[TaskRow]:  # fmt: skip
        """Newest first; `limit` counts after the filters."""
        sql, args = f"SELECT {_COLUMNS} FROM druid_tasks WHERE 1 = 1", list[Any]()
        if active is not None:
            sql, args = sql + " AND active = ?", [*args, self._bool(active)]
        if datasource is not None:
            sql, args = sql + " AND datasource = ?", [*args, datasource]
        sql += " ORDER BY created_date DESC, id DESC"
        if limit is not None:
            sql, args = sql + " LIMIT ?", [*args, max(0, int(limit))]
        with self._tx() as conn:
            return [_row(r) for r in conn.execute(self._q(sql), args).fetchall()]

    def update(self, task_id: str, at_attempt: int | None, **changes: Any) -> TaskRow | None:
        """Change an active task's runner columns (`runner_state`, `pid`, `started_date`, `attempt`);
        only while it is at `at_attempt` when given. Returns the row as changed, None when it was not."""
        allowed = {"runner_state", "pid", "started_date", "attempt"}
        if not changes or set(changes) - allowed:
            raise ValueError(f"update takes {sorted(allowed)}, got {sorted(changes)}")
        with self._tx() as conn:
            row = self._current(conn, task_id)
            if row is None or not row.active or (at_attempt is not None and row.attempt != at_attempt):
                return None
            sets = ", ".join(f"{name} = ?" for name in changes)
            conn.execute(self._q(f"UPDATE druid_tasks SET {sets} WHERE id = ?"), (*changes.values(), task_id))
            return replace(row, **changes)

    def finish(
        self,
        task_id: str,
        status: dict[str, Any],
        report: dict[str, Any] | None = None,
        *,
        attempt: int | None = None,
        unless_published: bool = False,
        fence: bool = False,
    ) -> TaskRow | None:
        """Complete an active task with `status` (and `report`) and release its locks, in one
        transaction; only at `attempt` when given, only before its publish with `unless_published`.
        `fence` also bumps the attempt, so a process still running for it can publish nothing.
        Returns the row as it was, None when nothing changed."""
        with self._tx() as conn:
            row = self._current(conn, task_id)
            if row is None or not row.active or (attempt is not None and row.attempt != attempt):
                return None
            if unless_published and row.published:
                return None
            conn.execute(
                self._q("UPDATE druid_tasks SET active = ?, runner_state = 'NONE', status_payload = ?,"
                        " report_payload = COALESCE(?, report_payload), attempt = ? WHERE id = ?"),
                (self._bool(False), orjson.dumps(status), None if report is None else orjson.dumps(report),
                 row.attempt + 1 if fence else row.attempt, task_id),
            )  # fmt: skip
            conn.execute(self._q("DELETE FROM druid_tasklocks WHERE task_id = ?"), (task_id,))
            return row

    # -- locks -------------------------------------------------------------------------------------
    def locks(self, task_id: str | None = None) -> list[LockRow]:
        """Every lock held (of one task when given), in the order granted."""
        with self._tx() as conn:
            return self._locks(conn, task_id)

    def _locks(self, conn: Any, task_id: str | None) -> list[LockRow]:
        sql, args = "SELECT id, task_id, lock_payload FROM druid_tasklocks", tuple[str, ...]()
        if task_id is not None:
            sql, args = sql + " WHERE task_id = ?", (task_id,)
        rows = conn.execute(self._q(sql + " ORDER BY id"), args).fetchall()
        return [LockRow(int(i), t, _json(p)) for i, t, p in rows]

    def grant(
        self, task_id: str, data_source: str, decide: Callable[[list[LockRow]], list[dict[str, Any]] | None]
    ) -> list[LockRow] | None:
        """Give an active task the locks `decide` returns for the locks now held on `data_source`
        by others (None: not now). The held locks are read and the new ones written in one
        transaction that no other grant on the data source runs beside."""
        with self._tx() as conn:
            if self._pg:
                key = f"strata-locks:{data_source}"
                conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (key,))
            row = self._current(conn, task_id)
            if row is None or not row.active:
                return None
            held = [
                lock for lock in self._locks(conn, None)
                if lock.data_source == data_source and lock.task_id != task_id
            ]  # fmt: skip
            wanted = decide(held)
            if wanted is None:
                return None
            for payload in wanted:
                conn.execute(
                    self._q("INSERT INTO druid_tasklocks (task_id, lock_payload) VALUES (?, ?)"),
                    (task_id, orjson.dumps(payload)),
                )
        return self.locks(task_id)

    def release(self, task_id: str) -> int:
        with self._tx() as conn:
            cur = conn.execute(self._q("DELETE FROM druid_tasklocks WHERE task_id = ?"), (task_id,))
            return int(cur.rowcount)

    # -- the lead: one coordinator runs the tasks of a database -------------------------------------
    def claim_lead(self, holder: str, now_ms: int, ttl_ms: int) -> str | None:
        """Take or keep the lead for `holder` (its address); None when it holds it now, else the
        other holder, whose heartbeat is younger than `ttl_ms`. The same address takes it back at
        once (a coordinator restarted where the old one ran, which is gone since the port is free)."""
        with self._tx() as conn:
            sql = "SELECT holder, heartbeat_ms FROM strata_coordinator_lead WHERE one = 1"
            found = conn.execute(sql + (" FOR UPDATE" if self._pg else "")).fetchone()
            if found is not None and found[0] != holder and now_ms - int(found[1]) < ttl_ms:
                return str(found[0])
            upsert = (
                "INSERT INTO strata_coordinator_lead (one, holder, heartbeat_ms) VALUES (1, ?, ?) ON CONFLICT"
                " (one) DO UPDATE SET holder = excluded.holder, heartbeat_ms = excluded.heartbeat_ms"
            )
            conn.execute(self._q(upsert), (holder, now_ms))
            return None

    def release_lead(self, holder: str) -> None:
        with self._tx() as conn:
            conn.execute(self._q("DELETE FROM strata_coordinator_lead WHERE holder = ?"), (holder,))

    # -- what a task's process checks inside its own writes ----------------------------------------
    def guard(
        self,
        task_id: str,
        attempt: int,
        writes: Sequence[tuple[str, Interval]],
        *,
        publishes: bool,
        joins: Sequence[tuple[str, Interval, str]] = (),
    ) -> TransactionGuard:
        """A check for a publish or delete transaction (`MetadataStore.publish(..., guard=)`): the
        task is active at `attempt`, has not published yet (when `publishes`), and holds unrevoked
        locks covering every (data source, interval) it writes; with `publishes` the row is marked
        published in that same transaction. Raises `Fenced` otherwise, which aborts the write.

        `joins` are the (data source, interval, version) of appended segments: each is refused when
        a used segment of another version overlaps it by now (an append sharing its lock created or
        replaced that time chunk meanwhile), so an append never lands under a version that hides it."""

        def check(conn: Any) -> None:
            row = self._current(conn, task_id)
            if row is None or not row.active or row.attempt != attempt:
                raise Fenced(f"task {task_id} was shut down or restarted (attempt {attempt} is stale): "
                             "nothing was written")  # fmt: skip
            if publishes and row.published:
                raise Fenced(f"task {task_id} has published already: nothing was written")
            missing = uncovered(self._locks(conn, task_id), writes)
            if missing:
                ds, interval = missing[0]
                raise Fenced(f"task {task_id} holds no lock on {interval} of {ds}: nothing was written")
            moved = self._chunks_moved(conn, joins)
            if moved:
                raise Fenced(f"task {task_id}: another task wrote {moved} meanwhile; nothing was published")
            if publishes:
                sql = self._q("UPDATE druid_tasks SET published = ? WHERE id = ?")
                conn.execute(sql, (self._bool(True), task_id))

        return check

    def _chunks_moved(self, conn: Any, joins: Sequence[tuple[str, Interval, str]]) -> str | None:
        for ds in sorted({ds for ds, _, _ in joins}):
            sql = self._q("SELECT payload FROM druid_segments WHERE used = ? AND dataSource = ?")
            rows = conn.execute(sql, (self._bool(True), ds)).fetchall()
            used = [DataSegment.from_json(orjson.loads(bytes(p))) for (p,) in rows]
            for _, interval, version in (j for j in joins if j[0] == ds):
                clash = (s for s in used if s.interval.overlaps(interval) and s.version != version)
                other = next(clash, None)
                if other is not None:
                    return f"{other.interval} of {ds} (version {other.version})"
        return None


def uncovered(locks: Sequence[LockRow], writes: Sequence[tuple[str, Interval]]) -> list[tuple[str, Interval]]:
    """The writes no unrevoked lock of their data source covers (the union of the locks' intervals
    must contain each interval)."""
    spans: dict[str, tuple[Interval, ...]] = {}
    for ds in {ds for ds, _ in writes}:
        spans[ds] = condense_intervals(
            lock.interval for lock in locks if lock.data_source == ds and not lock.payload.get("revoked")
        )
    return [(ds, iv) for ds, iv in writes if not any(span.contains(iv) for span in spans[ds])]
