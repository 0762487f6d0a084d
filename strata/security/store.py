"""Users, roles and grants kept in the metadata store's database, beside `druid_segments`.

One contract, two databases: a SQLite file (the embedded default) or PostgreSQL, reached through
the same `--metadata` path or URL as the segments. Every change bumps one version row in its own
transaction; nodes poll that row (a one-row read) and reload the whole snapshot when it moves.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson

from strata.security.model import ADMIN_ROLE, ADMIN_USER, INTERNAL_USER, AuthSnapshot
from strata.security.passwords import Credentials, hash_password
from strata.security.resources import Permission, admin_permissions
from strata.storage.metadata_store import MetadataStore, MetadataStoreError
from strata.storage.schema import Migration


class SecurityStoreError(RuntimeError):
    """The store cannot be opened or read."""


class NotFound(KeyError):
    """No such user or role (the API answers 400, as Druid's does)."""

    def __str__(self) -> str:
        return str(self.args[0])


class AlreadyExists(ValueError):
    """A user or role of that name exists already."""


def _tables(blob: str) -> str:
    return ";".join(
        [
            f"CREATE TABLE strata_auth_users (name TEXT PRIMARY KEY, salt {blob}, hash {blob},"
            " iterations INTEGER)",
            "CREATE TABLE strata_auth_roles (name TEXT PRIMARY KEY, permissions TEXT NOT NULL)",
            "CREATE TABLE strata_auth_user_roles (user_name TEXT NOT NULL, role_name TEXT NOT NULL,"
            " PRIMARY KEY (user_name, role_name))",
            "CREATE TABLE strata_auth_version (id INTEGER PRIMARY KEY, version BIGINT NOT NULL)",
            "INSERT INTO strata_auth_version (id, version) VALUES (1, 1)",
        ]
    )


def _postgres_tables(conn: Any) -> None:
    for statement in _tables("BYTEA").split(";"):
        conn.execute(statement)


# the migrations the metadata store runs once per database (storage.schema)
MIGRATIONS = [Migration(1, sqlite=_tables("BLOB"), postgresql=_postgres_tables)]


class SecurityStore:
    """The credentials and roles store, in the metadata store's own database (SQLite or PostgreSQL)
    through its `transaction()`: whoever may write that database is trusted, as in Druid."""

    def __init__(self, metadata: MetadataStore) -> None:
        self._meta = metadata
        self._ph = "?" if metadata.dialect == "sqlite" else "%s"
        self._postgres = metadata.dialect == "postgresql"
        try:
            metadata.migrate("security", MIGRATIONS)
        except (MetadataStoreError, OSError) as e:
            raise SecurityStoreError(f"cannot open the security store: {e}") from e

    def _q(self, sql: str) -> str:
        return sql if self._ph == "?" else sql.replace("?", self._ph)

    @contextmanager
    def _tx(self) -> Iterator[Any]:
        """One read transaction: its reads see one consistent state."""
        with self._meta.transaction() as conn:
            if self._postgres:  # several reads of one snapshot must agree (the default reads per statement)
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            yield _Cursor(conn)

    @contextmanager
    def _change(self) -> Iterator[Any]:
        """A write transaction that bumps the version row (which every node polls) first.

        Bumping first takes the row's lock before anything is read, so changes from several nodes
        run one after another and each one's checks see the one before it. On PostgreSQL this stays
        at READ COMMITTED: under REPEATABLE READ the second of two racing writers would fail with a
        serialisation error instead of waiting (SQLite's `BEGIN IMMEDIATE` serialises already)."""
        with self._meta.transaction() as conn:
            cur = _Cursor(conn)
            cur.execute("UPDATE strata_auth_version SET version = version + 1 WHERE id = 1")
            yield cur

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
        payload = _permissions_json(permissions)
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
        that exist already keep their passwords (the initial ones apply once).

        One transaction: nodes starting together must never see a user created but not yet given
        its password or role (a historical that did would refuse the broker's internal credentials
        until its next poll)."""
        initial = {ADMIN_USER: admin_password, INTERNAL_USER: internal_password}
        snap = self.snapshot()
        wanted = {u: p for u, p in initial.items() if p is not None and u not in snap.credentials}
        if ADMIN_ROLE in snap.roles and not wanted:
            return
        hashed = {user: hash_password(password) for user, password in wanted.items()}  # before: slow
        permissions = _permissions_json(admin_permissions())
        with self._change() as cur:
            if not self._exists(cur, "strata_auth_roles", ADMIN_ROLE):
                cur.execute(
                    self._q("INSERT INTO strata_auth_roles (name, permissions) VALUES (?, ?)"),
                    (ADMIN_ROLE, permissions),
                )
            for user, creds in hashed.items():
                if self._exists(cur, "strata_auth_users", user):
                    continue  # another node started at the same time and created it
                cur.execute(
                    self._q("INSERT INTO strata_auth_users (name, salt, hash, iterations) VALUES (?,?,?,?)"),
                    (user, creds.salt, creds.hash, creds.iterations),
                )
                cur.execute(
                    self._q("INSERT INTO strata_auth_user_roles (user_name, role_name) VALUES (?, ?)"),
                    (user, ADMIN_ROLE),
                )

    def close(self) -> None:
        self._meta.close()

    # -- helpers -------------------------------------------------------------------------------
    def _exists(self, cur: Any, table: str, name: str) -> bool:
        cur.execute(self._q(f"SELECT 1 FROM {table} WHERE name = ?"), (name,))
        return cur.fetchone() is not None

    def _need(self, cur: Any, table: str, name: str, what: str) -> None:
        if not self._exists(cur, table, name):
            raise NotFound(f"{what} [{name}] does not exist.")


class _Cursor:
    """`execute` then `fetchone`/`fetchall` over either DB-API connection (sqlite3, psycopg)."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn
        self._last: Any = None

    def execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        self._last = self._conn.execute(sql, params)

    def fetchone(self) -> Any:
        return self._last.fetchone()

    def fetchall(self) -> list[Any]:
        return list(self._last.fetchall())


def _permissions_json(permissions: Sequence[Permission]) -> str:
    """A role's permissions as its row stores them."""
    return orjson.dumps([p.to_json() for p in permissions]).decode()


def open_security_store(path_or_url: str | Path) -> SecurityStore:
    """The store in the database `--metadata` names (a file, sqlite:///path, postgresql://...),
    opened by the metadata store's own opener."""
    from strata.storage import open_metadata_store

    try:
        return SecurityStore(open_metadata_store(path_or_url))
    except MetadataStoreError as e:
        raise SecurityStoreError(str(e)) from None
