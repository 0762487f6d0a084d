"""Users, roles and grants kept in the metadata store's database, beside `druid_segments`.

One contract, two databases: a SQLite file (the embedded default) or PostgreSQL, reached through
the same `--metadata` path or URL as the segments. Every change bumps one version row in its own
transaction; nodes poll that row (a one-row read) and reload the whole snapshot when it moves.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson

from security.model import ADMIN_ROLE, ADMIN_USER, INTERNAL_USER, AuthSnapshot
from security.passwords import Credentials, hash_password
from security.resources import Permission, admin_permissions


class SecurityStoreError(RuntimeError):
    """The store cannot be opened or read."""


class NotFound(KeyError):
    """No such user or role (the API answers 400, as Druid's does)."""

    def __str__(self) -> str:
        return str(self.args[0])


class AlreadyExists(ValueError):
    """A user or role of that name exists already."""


_SCHEMA = [
    "CREATE TABLE IF NOT EXISTS strata_auth_users (name TEXT PRIMARY KEY, salt {blob}, hash {blob},"
    " iterations INTEGER)",
    "CREATE TABLE IF NOT EXISTS strata_auth_roles (name TEXT PRIMARY KEY, permissions TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS strata_auth_user_roles (user_name TEXT NOT NULL, role_name TEXT NOT NULL,"
    " PRIMARY KEY (user_name, role_name))",
    "CREATE TABLE IF NOT EXISTS strata_auth_version (id INTEGER PRIMARY KEY, version BIGINT NOT NULL)",
]


class SecurityStore:
    """The credentials and roles store over a DB-API connection (sqlite3 or psycopg)."""

    def __init__(
        self, connect: Callable[[], Any], *, placeholder: str, blob: str, begin: tuple[str, str]
    ) -> None:
        self._ph = placeholder
        self._begin_read, self._begin_write = begin
        self._lock = threading.RLock()
        try:
            self._conn = connect()
            with self._tx(write=True) as cur:
                for statement in _SCHEMA:
                    cur.execute(statement.format(blob=blob))
                cur.execute(self._q("SELECT version FROM strata_auth_version WHERE id = 1"))
                if cur.fetchone() is None:
                    cur.execute(self._q("INSERT INTO strata_auth_version (id, version) VALUES (1, 1)"))
        except (sqlite3.Error, OSError) as e:
            raise SecurityStoreError(f"cannot open the security store: {e}") from e

    def _q(self, sql: str) -> str:
        return sql if self._ph == "?" else sql.replace("?", self._ph)

    @contextmanager
    def _tx(self, *, write: bool = False) -> Iterator[Any]:
        """One transaction (reads see one consistent state; writes serialise)."""
        with self._lock:
            cur = self._conn.cursor()
            begin = self._begin_write if write else self._begin_read
            if begin:
                cur.execute(begin)
            try:
                yield cur
            except BaseException:
                self._conn.rollback()
                raise
            self._conn.commit()

    @contextmanager
    def _change(self) -> Iterator[Any]:
        """A write transaction that also bumps the version row, which every node polls."""
        with self._tx(write=True) as cur:
            yield cur
            cur.execute("UPDATE strata_auth_version SET version = version + 1 WHERE id = 1")

    # -- reads ---------------------------------------------------------------------------------
    def version(self) -> int:
        with self._tx() as cur:
            cur.execute("SELECT version FROM strata_auth_version WHERE id = 1")
            row = cur.fetchone()
        return int(row[0]) if row else 0

    def snapshot(self) -> AuthSnapshot:
        with self._tx() as cur:
            cur.execute("SELECT version FROM strata_auth_version WHERE id = 1")
            version = int(cur.fetchone()[0])
            cur.execute("SELECT name, salt, hash, iterations FROM strata_auth_users")
            users = {
                n: Credentials(bytes(s), bytes(h), int(i)) if h is not None else None
                for n, s, h, i in cur.fetchall()
            }
            cur.execute("SELECT name, permissions FROM strata_auth_roles")
            roles = {
                n: tuple(Permission.from_json(p) for p in orjson.loads(perms)) for n, perms in cur.fetchall()
            }
            cur.execute("SELECT user_name, role_name FROM strata_auth_user_roles")
            assigned: dict[str, set[str]] = {}
            for user, role in cur.fetchall():
                assigned.setdefault(user, set()).add(role)
        return AuthSnapshot(version, users, roles, {u: frozenset(r) for u, r in assigned.items()})

    # -- users ---------------------------------------------------------------------------------
    def create_user(self, name: str) -> None:
        with self._change() as cur:
            if self._exists(cur, "strata_auth_users", name):
                raise AlreadyExists(f"User [{name}] already exists.")
            cur.execute(self._q("INSERT INTO strata_auth_users (name) VALUES (?)"), (name,))

    def delete_user(self, name: str) -> None:
        with self._change() as cur:
            self._need(cur, "strata_auth_users", name, "User")
            cur.execute(self._q("DELETE FROM strata_auth_user_roles WHERE user_name = ?"), (name,))
            cur.execute(self._q("DELETE FROM strata_auth_users WHERE name = ?"), (name,))

    def set_password(self, name: str, password: str) -> None:
        creds = hash_password(password)  # before the transaction: it takes milliseconds
        with self._change() as cur:
            self._need(cur, "strata_auth_users", name, "User")
            cur.execute(
                self._q("UPDATE strata_auth_users SET salt = ?, hash = ?, iterations = ? WHERE name = ?"),
                (creds.salt, creds.hash, creds.iterations, name),
            )

    # -- roles ---------------------------------------------------------------------------------
    def create_role(self, name: str) -> None:
        with self._change() as cur:
            if self._exists(cur, "strata_auth_roles", name):
                raise AlreadyExists(f"Role [{name}] already exists.")
            cur.execute(
                self._q("INSERT INTO strata_auth_roles (name, permissions) VALUES (?, '[]')"), (name,)
            )

    def delete_role(self, name: str) -> None:
        with self._change() as cur:
            self._need(cur, "strata_auth_roles", name, "Role")
            cur.execute(self._q("DELETE FROM strata_auth_user_roles WHERE role_name = ?"), (name,))
            cur.execute(self._q("DELETE FROM strata_auth_roles WHERE name = ?"), (name,))

    def set_permissions(self, role: str, permissions: list[Permission]) -> None:
        payload = orjson.dumps([p.to_json() for p in permissions]).decode()
        with self._change() as cur:
            self._need(cur, "strata_auth_roles", role, "Role")
            cur.execute(
                self._q("UPDATE strata_auth_roles SET permissions = ? WHERE name = ?"), (payload, role)
            )

    def assign(self, user: str, role: str) -> None:
        with self._change() as cur:
            self._need(cur, "strata_auth_users", user, "User")
            self._need(cur, "strata_auth_roles", role, "Role")
            cur.execute(
                self._q("SELECT 1 FROM strata_auth_user_roles WHERE user_name = ? AND role_name = ?"),
                (user, role),
            )
            if cur.fetchone() is None:
                cur.execute(
                    self._q("INSERT INTO strata_auth_user_roles (user_name, role_name) VALUES (?, ?)"),
                    (user, role),
                )

    def unassign(self, user: str, role: str) -> None:
        with self._change() as cur:
            self._need(cur, "strata_auth_users", user, "User")
            self._need(cur, "strata_auth_roles", role, "Role")
            cur.execute(
                self._q("DELETE FROM strata_auth_user_roles WHERE user_name = ? AND role_name = ?"),
                (user, role),
            )

    def ensure_initial(self, admin_password: str | None, internal_password: str | None) -> None:
        """Druid's first start: an `admin` role with every permission, the `admin` user and the
        internal client (escalator) user holding it, with the configured initial passwords. Users
        that exist already keep their passwords (the initial ones apply once)."""
        snap = self.snapshot()
        if ADMIN_ROLE not in snap.roles:
            try:
                self.create_role(ADMIN_ROLE)
                self.set_permissions(ADMIN_ROLE, admin_permissions())
            except AlreadyExists:  # another node started at the same time
                pass
        for user, password in ((ADMIN_USER, admin_password), (INTERNAL_USER, internal_password)):
            if password is None or user in snap.credentials:
                continue
            try:
                self.create_user(user)
            except AlreadyExists:
                continue
            self.set_password(user, password)
            self.assign(user, ADMIN_ROLE)

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    # -- helpers -------------------------------------------------------------------------------
    def _exists(self, cur: Any, table: str, name: str) -> bool:
        cur.execute(self._q(f"SELECT 1 FROM {table} WHERE name = ?"), (name,))
        return cur.fetchone() is not None

    def _need(self, cur: Any, table: str, name: str, what: str) -> None:
        if not self._exists(cur, table, name):
            raise NotFound(f"{what} [{name}] does not exist.")


def open_security_store(path_or_url: str | Path) -> SecurityStore:
    """The store in the metadata database named as `--metadata` names it: a file path,
    `sqlite:///path`, or `postgresql://...`."""
    text = str(path_or_url)
    if text.startswith(("postgresql://", "postgres://")):
        return _postgres(text)
    if text.startswith("sqlite:///"):
        text = text[len("sqlite:///") :]
    elif "://" in text:
        raise SecurityStoreError(
            f"unsupported metadata store URL {text!r} (a file path, sqlite:/// or postgresql://)"
        )
    path = Path(text)
    path.parent.mkdir(parents=True, exist_ok=True)

    def connect() -> sqlite3.Connection:
        conn = sqlite3.connect(str(path), timeout=30.0, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        return conn

    return SecurityStore(connect, placeholder="?", blob="BLOB", begin=("BEGIN", "BEGIN IMMEDIATE"))


def _postgres(url: str) -> SecurityStore:
    try:
        import psycopg
    except ImportError as e:
        raise SecurityStoreError("a postgresql:// metadata store needs the psycopg package") from e

    def connect() -> Any:
        try:
            return psycopg.connect(url, connect_timeout=10)
        except psycopg.Error as e:
            raise SecurityStoreError(f"cannot connect to the metadata store: {type(e).__name__}") from None

    return SecurityStore(
        connect,
        placeholder="%s",
        blob="BYTEA",
        begin=("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ", ""),
    )
