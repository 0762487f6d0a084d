"""Retention rules as Druid keeps them (`druid_rules`): every change is a new row with a version, the
newest row of a data source is in force, older rows are its history; each change also writes
Druid's audit entry (type `rules`, keyed by data source) in the same transaction.

Only the table and its reads and writes live here; what rules mean (load, drop, broadcast; tiers)
is `strata.storage.retention_rules`, which the coordinator's rule duty and every historical apply
to `current()`. The cluster-wide default rules are stored under Druid's name for them, `_default`.
"""

from __future__ import annotations

from typing import Any

import orjson

from strata.storage.audit_log import AuditInfo, AuditLog
from strata.storage.metadata_store import MetadataStore
from strata.storage.task_schema import RULE_MIGRATIONS, RULES_COMPONENT
from strata.storage.task_store import now_iso

DEFAULT_DATASOURCE = "_default"
AUDIT_TYPE = "rules"


class RuleStore:
    def __init__(self, metadata: MetadataStore) -> None:
        self._meta = metadata
        self._mark = "%s" if metadata.dialect == "postgresql" else "?"
        metadata.migrate(RULES_COMPONENT, RULE_MIGRATIONS)
        self.audit = AuditLog(metadata)

    def set(self, data_source: str, rules: list[dict[str, Any]], audit: AuditInfo | None = None) -> str:
        """Put `rules` in force for `data_source` and record who did it; returns the new version."""
        version = now_iso()
        m = self._mark
        with self._meta.transaction() as conn:
            sql = f"SELECT version FROM druid_rules WHERE dataSource = {m}"
            taken = {r[0] for r in conn.execute(sql, (data_source,)).fetchall()}
            while version in taken:  # two changes in one millisecond stay two rows
                version += "_"
            conn.execute(
                f"INSERT INTO druid_rules (id, dataSource, version, payload) VALUES ({m}, {m}, {m}, {m})",
                (f"{data_source}_{version}", data_source, version, orjson.dumps(rules)),
            )
            self.audit.record(conn, data_source, AUDIT_TYPE, audit or AuditInfo(), rules, version[:24])
        return version

    def current(self) -> dict[str, list[dict[str, Any]]]:
        """The rules in force, per data source (`_default` included when set)."""
        with self._meta.transaction() as conn:
            rows = conn.execute("SELECT dataSource, version, payload FROM druid_rules").fetchall()
        newest: dict[str, tuple[str, list[dict[str, Any]]]] = {}
        for ds, version, payload in rows:
            if ds not in newest or version > newest[ds][0]:
                newest[ds] = (version, orjson.loads(bytes(payload)))
        return {ds: rules for ds, (_, rules) in newest.items()}

    def history(self, data_source: str) -> list[tuple[str, list[dict[str, Any]]]]:
        """(version, rules) of every change to `data_source`, newest first."""
        with self._meta.transaction() as conn:
            rows = conn.execute(
                f"SELECT version, payload FROM druid_rules WHERE dataSource = {self._mark}", (data_source,)
            ).fetchall()
        return sorted(((v, orjson.loads(bytes(p))) for v, p in rows), reverse=True)
