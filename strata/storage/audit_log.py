"""Druid's audit log (`druid_audit`): who changed a piece of the cluster's configuration, when, why.

Retention rules (type `rules`, keyed by data source) and auto-compaction configs (type
`compaction`) write an entry in the same transaction as the change itself, so the history never
misses or invents one. An entry is Druid's AuditEntry: `key`, `type`, `auditInfo` (`author`,
`comment` from the `X-Druid-Author` / `X-Druid-Comment` headers, the caller's `ip`), `payload` (the
new value as JSON text) and `auditTime`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from strata.storage.metadata_store import MetadataStore
from strata.storage.schema import Migration, statements
from strata.storage.task_store import now_iso
from timeline import Interval, format_instant, parse_instant

AUDIT_COMPONENT = "audit"
_TABLE = """
CREATE TABLE IF NOT EXISTS druid_audit (
    id {serial} PRIMARY KEY,
    audit_key TEXT NOT NULL,
    type TEXT NOT NULL,
    author TEXT NOT NULL,
    comment TEXT NOT NULL,
    ip TEXT NOT NULL,
    created_date TEXT NOT NULL,
    payload {blob} NOT NULL
);
CREATE INDEX IF NOT EXISTS idx_druid_audit_key_time ON druid_audit (audit_key, created_date);
CREATE INDEX IF NOT EXISTS idx_druid_audit_type_time ON druid_audit (type, created_date)
"""


AUDIT_MIGRATIONS = (
    Migration(
        1,
        sqlite=_TABLE.format(serial="INTEGER", blob="BLOB"),
        postgresql=statements(_TABLE.format(serial="BIGSERIAL", blob="BYTEA")),
    ),
)
HISTORY_MS = 7 * 24 * 3600 * 1000  # Druid's druid.audit.manager.auditHistoryMillis default: one week


@dataclass(frozen=True)
class AuditInfo:
    author: str = ""
    comment: str = ""
    ip: str = ""

    def to_json(self) -> dict[str, str]:
        return {"author": self.author, "comment": self.comment, "ip": self.ip}


class AuditLog:
    def __init__(self, metadata: MetadataStore) -> None:
        self._meta = metadata
        self._mark = "%s" if metadata.dialect == "postgresql" else "?"
        metadata.migrate(AUDIT_COMPONENT, AUDIT_MIGRATIONS)

    def record(
        self, conn: Any, key: str, type: str, info: AuditInfo, payload: Any, when: str | None = None
    ) -> None:
        """Add an entry inside the caller's transaction (`conn`), beside the change it describes."""
        m = self._mark
        conn.execute(
            f"INSERT INTO druid_audit (audit_key, type, author, comment, ip, created_date, payload)"
            f" VALUES ({m}, {m}, {m}, {m}, {m}, {m}, {m})",
            (key, type, info.author, info.comment, info.ip, when or now_iso(), orjson.dumps(payload)),
        )

    def history(
        self, type: str, key: str | None = None, *, interval: Interval | None = None, count: int | None = None
    ) -> list[dict[str, Any]]:
        """Druid's fetchAuditHistory: with `count`, the newest `count` entries (newest first);
        otherwise those made within `interval` (default: the last week), oldest first."""
        m = self._mark
        sql = (
            "SELECT audit_key, type, author, comment, ip, payload, created_date FROM druid_audit"
            f" WHERE type = {m}"
        )
        args: list[Any] = [type]
        if key is not None:
            sql, args = sql + f" AND audit_key = {m}", [*args, key]
        if count is not None:
            if count <= 0:
                raise ValueError("Limit must be greater than zero!")
            sql, args = sql + f" ORDER BY created_date DESC, id DESC LIMIT {m}", [*args, count]
        else:
            if interval is None:
                now = parse_instant(now_iso())
                interval = Interval(now - HISTORY_MS, now + 1)
            sql += f" AND created_date >= {m} AND created_date < {m} ORDER BY created_date, id"
            args += [format_instant(interval.start), format_instant(interval.end)]
        with self._meta.transaction() as conn:
            rows = conn.execute(sql, args).fetchall()
        return [
            {"key": k, "type": t, "auditInfo": AuditInfo(a, c, ip).to_json(), "payload": bytes(p).decode(),
             "auditTime": when}
            for k, t, a, c, ip, p, when in rows
        ]  # fmt: skip
