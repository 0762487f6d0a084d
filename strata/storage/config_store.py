"""Druid's configuration table (`druid_config`): a JSON document per name, such as the coordinator's
auto-compaction config (`coordinator.compaction.config`).

A change reads the document and writes the new one in one transaction (the row read `FOR UPDATE`
on PostgreSQL; SQLite's transactions are `BEGIN IMMEDIATE`), with Druid's audit entry beside it, so
two changes made at once never lose one another.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from strata.storage.audit_log import AuditInfo, AuditLog
from strata.storage.metadata_store import MetadataStore
from strata.storage.schema import Migration

CONFIG_COMPONENT = "config"
_TABLE = "CREATE TABLE IF NOT EXISTS druid_config (name TEXT PRIMARY KEY, payload {blob} NOT NULL)"
CONFIG_MIGRATIONS = (Migration(1, sqlite=_TABLE.format(blob="BLOB"), postgresql=_TABLE.format(blob="BYTEA")),)


class ConfigStore:
    def __init__(self, metadata: MetadataStore) -> None:
        self._meta = metadata
        self._pg = metadata.dialect == "postgresql"
        self._mark = "%s" if self._pg else "?"
        metadata.migrate(CONFIG_COMPONENT, CONFIG_MIGRATIONS)
        self.audit = AuditLog(metadata)

    def get(self, name: str) -> Any:
        """The document, or None when never set."""
        with self._meta.transaction() as conn:
            return self._read(conn, name, lock=False)

    def _read(self, conn: Any, name: str, *, lock: bool) -> Any:
        sql = f"SELECT payload FROM druid_config WHERE name = {self._mark}" + (
            " FOR UPDATE" if lock and self._pg else ""
        )
        row = conn.execute(sql, (name,)).fetchone()
        return None if row is None else orjson.loads(bytes(row[0]))

    def update(self, name: str, change: Callable[[Any], Any], audit: AuditInfo) -> Any:
        """Replace the document with `change(current)` (current: None when never set) and record the
        change in the audit log (type and key: `name`); returns the new document. An exception
        `change` raises leaves everything as it was."""
        m = self._mark
        with self._meta.transaction() as conn:
            current = self._read(conn, name, lock=True)
            new = change(current)
            payload = orjson.dumps(new)
            if current is None:
                conn.execute(f"INSERT INTO druid_config (name, payload) VALUES ({m}, {m})", (name, payload))
            else:
                conn.execute(f"UPDATE druid_config SET payload = {m} WHERE name = {m}", (payload, name))
            self.audit.record(conn, name, name, audit, new)
        return new
