"""Druid's JSON shapes for tasks: TaskStatus (what a task's row keeps), TaskStatusPlus (what the task
API lists) and the task reports (`ingestionStatsAndErrors`, `killUnusedSegments`).

Status codes are RUNNING, SUCCESS and FAILED; the runner state says where a running task is:
WAITING (for its interval locks), PENDING (locked, waiting for a task slot), RUNNING (its process
runs), NONE (complete). The API's `state=` filter names them pending / waiting / running / complete.
"""

from __future__ import annotations

from typing import Any

from strata.storage.task_store import TaskRow
from timeline import parse_instant

UNKNOWN_LOCATION: dict[str, Any] = {"host": None, "port": -1, "tlsPort": -1}
EPOCH = "1970-01-01T00:00:00.000Z"
API_STATES = ("pending", "waiting", "running", "complete")


def task_status(
    task_id: str, state: str, duration: int = -1, error: str | None = None,
    location: dict[str, Any] | None = None,
) -> dict[str, Any]:  # fmt: skip
    """Druid's TaskStatus JSON."""
    return {"id": task_id, "status": state, "duration": duration, "errorMsg": error,
            "location": location or UNKNOWN_LOCATION}  # fmt: skip


def api_state(row: TaskRow) -> str:
    if not row.active:
        return "complete"
    return {"WAITING": "waiting", "PENDING": "pending"}.get(row.runner_state, "running")


def status_plus(row: TaskRow, location: dict[str, Any]) -> dict[str, Any]:
    """Druid's TaskStatusPlus of a task; `location` is where a running task runs."""
    state = str(row.status.get("status", "RUNNING"))
    running = row.active and row.runner_state == "RUNNING"
    return {
        "id": row.id,
        "groupId": row.group_id,
        "type": row.type,
        "createdTime": row.created_date,
        "queueInsertionTime": row.created_date if row.active else EPOCH,
        "statusCode": state,
        "status": state,
        "runnerStatusCode": row.runner_state if row.active else "NONE",
        "duration": row.status.get("duration", -1) if not row.active else -1,
        "location": location if running else row.status.get("location") or UNKNOWN_LOCATION,
        "dataSource": row.datasource,
        "errorMsg": row.status.get("errorMsg"),
    }


def elapsed_ms(since_iso: str | None, now_ms: int) -> int:
    """Milliseconds from an ISO instant to now (0 when unknown): a task's duration."""
    if not since_iso:
        return 0
    try:
        return max(0, now_ms - parse_instant(since_iso))
    except ValueError:
        return 0


def ingestion_report(
    task_id: str, state: str, row_stats: dict[str, int], unparseable: list[str], error: str | None,
    segments_published: int = 0,
) -> dict[str, Any]:  # fmt: skip
    """Druid's `ingestionStatsAndErrors` report (phase `buildSegments`; Strata's engines have no
    separate determine-partitions pass over the input)."""
    zero = {"processed": 0, "processedBytes": 0, "processedWithError": 0, "thrownAway": 0, "unparseable": 0}
    return {
        "ingestionStatsAndErrors": {
            "type": "ingestionStatsAndErrors",
            "taskId": task_id,
            "payload": {
                "ingestionState": state,
                "unparseableEvents": {"buildSegments": unparseable} if unparseable else {},
                "rowStats": {"determinePartitions": zero, "buildSegments": {**zero, **row_stats}},
                "errorMsg": error,
                "segmentAvailabilityConfirmed": False,
                "segmentAvailabilityWaitTimeMs": 0,
                "segmentsPublished": segments_published,
            },
        }
    }


def kill_report(task_id: str, killed: int, batches: int, marked_unused: int) -> dict[str, Any]:
    """Druid's `killUnusedSegments` report."""
    return {
        "killUnusedSegments": {
            "type": "killUnusedSegments",
            "taskId": task_id,
            "payload": {
                "numSegmentsKilled": killed,
                "numBatchesProcessed": batches,
                "numSegmentsMarkedAsUnused": marked_unused,
            },
        }
    }
