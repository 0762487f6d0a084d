"""Schema versions of the metadata store's tables, one number per component, and their migrations.

Both stores keep a `strata_schema (component, version)` table. Each component (the segments
tables here; another module's tables, such as security's, later) lists its migrations in order;
opening a store applies those it has not yet run, inside the caller's transaction, and refuses a
database written by a newer Strata. A step is SQL text or a function of the DB-API connection,
per dialect ("sqlite" or "postgresql"), because the two databases differ in what a step can say.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from strata.storage.store_errors import MetadataStoreError

Dialect = Literal["sqlite", "postgresql"]
Step = str | Callable[[Any], None]

_TABLE = "CREATE TABLE IF NOT EXISTS strata_schema (component TEXT PRIMARY KEY, version INTEGER NOT NULL)"


@dataclass(frozen=True, slots=True)
class Migration:
    """What takes a component from `version - 1` to `version`."""

    version: int
    sqlite: Step
    postgresql: Step


def statements(sql: str) -> Step:
    """A PostgreSQL step running each `;`-separated statement of `sql` (psycopg runs one at a time)."""

    def step(conn: Any) -> None:
        for statement in sql.split(";"):
            if statement.strip():
                conn.execute(statement)

    return step


def _mark(dialect: Dialect) -> str:
    return "?" if dialect == "sqlite" else "%s"


def current_version(conn: Any, dialect: Dialect, component: str) -> int:
    """The component's recorded version (0: never created); creates the version table if missing
    (only then: a role that may read but not create, a read-only node's, opens an existing store)."""
    exists = (
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'strata_schema'"
        if dialect == "sqlite"
        else "SELECT count(*) FROM pg_catalog.pg_tables WHERE tablename = 'strata_schema'"
        " AND schemaname = ANY(current_schemas(false))"
    )
    if not conn.execute(exists).fetchone()[0]:
        conn.execute(_TABLE)
    row = conn.execute(
        f"SELECT version FROM strata_schema WHERE component = {_mark(dialect)}", (component,)
    ).fetchone()
    return 0 if row is None else int(row[0])


def migrate(
    conn: Any,
    dialect: Dialect,
    component: str,
    migrations: Sequence[Migration],
    *,
    where: str,
    found: int | None = None,
) -> int:
    """Bring `component` to its newest version; returns it. Runs inside the caller's transaction,
    which must keep other writers out (SQLite's BEGIN IMMEDIATE, a PostgreSQL advisory lock).
    `found` overrides the recorded version (a file written before the version table existed)."""
    if [m.version for m in migrations] != list(range(1, len(migrations) + 1)):
        raise ValueError(f"migrations of {component!r} must be numbered 1..n in order")
    recorded = current_version(conn, dialect, component)
    start = max(recorded, found or 0)
    newest = len(migrations)
    if start > newest:
        raise MetadataStoreError(
            f"metadata store {where} has {component} schema version {start}, newer than this Strata "
            f"understands ({newest}); upgrade Strata to open it"
        )
    for m in migrations[start:]:
        step = m.sqlite if dialect == "sqlite" else m.postgresql
        if callable(step):
            step(conn)
        elif dialect == "sqlite":  # sqlite3 runs one statement per call
            for statement in step.split(";"):
                if statement.strip():
                    conn.execute(statement)
        else:
            conn.execute(step)
    if newest != recorded:
        mark = _mark(dialect)
        conn.execute(
            f"INSERT INTO strata_schema (component, version) VALUES ({mark}, {mark}) "
            "ON CONFLICT (component) DO UPDATE SET version = excluded.version",
            (component, newest),
        )
    return newest
