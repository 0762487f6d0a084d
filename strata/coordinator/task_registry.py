"""The task types the coordinator runs: Druid's native batch `index_parallel` and `index` (the same
spec, run by strata.ingestion locally or on Spark), `kill`, `compact`, and `query_controller` (SQL
INSERT and REPLACE, `strata.coordinator.sql_task`). Importing this module registers them; another
type registers a `TaskKind` of its own the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from strata.coordinator.compaction_spec import COMPACT_PRIORITY, plan_compact
from strata.coordinator.sql_task import PRIORITY as SQL_PRIORITY
from strata.coordinator.sql_task import plan_query
from strata.coordinator.task_types import InvalidTask, TaskKind, TaskPlan, register
from strata.ingestion.errors import SpecError
from strata.ingestion.spec import parse_spec
from timeline import Interval, condense_intervals

BATCH_PRIORITY = 50  # Druid's defaults: batch index tasks 50, other tasks (kill) 0
KILL_PRIORITY = 0


def plan_index(body: Mapping[str, Any]) -> TaskPlan:
    """The spec's `granularitySpec.intervals`, widened to whole segment-granularity chunks, are
    what the task locks; without intervals it writes wherever its rows fall, so it locks the data
    source's whole timeline (give intervals to let tasks on other days run beside it)."""
    try:
        spec = parse_spec(body)
    except SpecError as e:
        raise InvalidTask(str(e)) from None
    intervals: tuple[Interval, ...] | None = None
    if spec.granularity.intervals:
        chunks = [b for iv in spec.granularity.intervals for b in spec.granularity.segment.buckets(iv)]
        intervals = condense_intervals(chunks)
    return TaskPlan(spec.data_source, intervals, replaces=not spec.append)


def _interval(value: Any, what: str) -> Interval:
    if not isinstance(value, str):
        raise InvalidTask(f"the kill task needs '{what}' as an ISO-8601 interval")
    try:
        return Interval.parse(value.replace("_", "/") if "/" not in value else value)
    except ValueError as e:
        raise InvalidTask(f"Invalid value for field [{what}]: {e}") from None


def plan_kill(body: Mapping[str, Any]) -> TaskPlan:
    """Druid's kill task: `dataSource`, `interval`; optional `versions`, `limit`, `batchSize`,
    `markAsUnused` (deprecated: first mark the used segments of the interval unused)."""
    ds = body.get("dataSource")
    if not isinstance(ds, str) or not ds:
        raise InvalidTask("the kill task needs 'dataSource'")
    interval = _interval(body.get("interval"), "interval")
    versions = body.get("versions")
    strings = isinstance(versions, list) and all(isinstance(v, str) for v in versions)
    if versions is not None and not strings:
        raise InvalidTask("'versions' must be a list of version strings")
    for field in ("limit", "batchSize"):
        value = body.get(field)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value <= 0):
            raise InvalidTask(f"'{field}' must be a positive integer, got {value!r}")
    return TaskPlan(ds, (interval,), replaces=True, id_interval=interval)


for _name in ("index_parallel", "index"):
    register(TaskKind(_name, plan_index, "strata.coordinator.index_task:run", BATCH_PRIORITY))
register(TaskKind("kill", plan_kill, "strata.coordinator.kill_task:run", KILL_PRIORITY))
register(TaskKind("compact", plan_compact, "strata.coordinator.compact_task:run", COMPACT_PRIORITY))
register(TaskKind("query_controller", plan_query, "strata.coordinator.sql_task:run", SQL_PRIORITY))
