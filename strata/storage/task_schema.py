"""The coordinator's tables in both dialects: Druid's `druid_tasks` and `druid_tasklocks` layout, and
`druid_rules` for retention rules.

`druid_tasks` keeps Druid's columns (id, created_date, datasource, payload = the task JSON,
status_payload = Druid's TaskStatus JSON, active, type, group_id) and adds what a restart needs:
the runner state (WAITING / PENDING / RUNNING / NONE), the attempt number every write of a task's
process is checked against (a fencing token: a process of an older attempt can change nothing),
whether its segments are published, its process id and its report. `druid_tasklocks` holds one
row per interval lock, the lock as Druid's TaskLock JSON. `strata_coordinator_lead` names the one
coordinator that runs tasks (its address and last heartbeat). `druid_rules` is Druid's table of
retention rules (a version per change, the newest per data source in force).
"""

from __future__ import annotations

from strata.storage.schema import Migration, statements

TASKS_COMPONENT = "tasks"
RULES_COMPONENT = "rules"

_TASKS = """
CREATE TABLE IF NOT EXISTS druid_tasks (
    id TEXT PRIMARY KEY,
    created_date TEXT NOT NULL,
    datasource TEXT NOT NULL,
    payload {blob} NOT NULL,
    status_payload {blob} NOT NULL,
    active {boolean} NOT NULL,
    type TEXT,
    group_id TEXT,
    runner_state TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    published {boolean} NOT NULL,
    pid INTEGER,
    started_date TEXT,
    report_payload {blob}
);
CREATE INDEX IF NOT EXISTS idx_druid_tasks_active_created_date ON druid_tasks (active, created_date);
CREATE TABLE IF NOT EXISTS druid_tasklocks (
    id {serial} PRIMARY KEY,
    task_id TEXT NOT NULL,
    lock_payload {blob} NOT NULL
);
CREATE INDEX IF NOT EXISTS idx_druid_tasklocks_task_id ON druid_tasklocks (task_id);
CREATE TABLE IF NOT EXISTS strata_coordinator_lead (
    one INTEGER PRIMARY KEY CHECK (one = 1),
    holder TEXT NOT NULL,
    heartbeat_ms BIGINT NOT NULL
)
"""

_RULES = """
CREATE TABLE IF NOT EXISTS druid_rules (
    id TEXT PRIMARY KEY,
    dataSource TEXT NOT NULL,
    version TEXT NOT NULL,
    payload {blob} NOT NULL
);
CREATE INDEX IF NOT EXISTS idx_druid_rules_datasource ON druid_rules (dataSource)
"""


TASK_MIGRATIONS = (
    Migration(
        1,
        sqlite=_TASKS.format(blob="BLOB", boolean="INTEGER", serial="INTEGER"),
        postgresql=statements(_TASKS.format(blob="BYTEA", boolean="BOOLEAN", serial="BIGSERIAL")),
    ),
)
RULE_MIGRATIONS = (
    Migration(1, sqlite=_RULES.format(blob="BLOB"), postgresql=statements(_RULES.format(blob="BYTEA"))),
)
