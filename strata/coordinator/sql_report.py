"""Druid's `multiStageQuery` report of a SQL ingestion task, and its faults.

The report has MSQ's shape (`status` with `errorReport`, `stages`, `counters`), the stages being
what Strata ran: reading and the statement (`scan`, or the whole statement on DuckDB) then the
segment generator with the data schema it wrote. A failure is one of MSQ's fault codes with its
message: TooManyWarnings (unparseable input), InsertTimeNull, InsertTimeOutOfBounds,
InsertCannotAllocateSegment, InsertCannotReplaceExistingSegment, InsertCannotBeEmpty, UnknownError.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from strata.ingestion.errors import (
    CannotAppend,
    InsertTimeNull,
    InsertTimeOutOfBounds,
    NothingToIngest,
    TooManyParseExceptions,
)
from strata.storage.metadata_store import MetadataStoreError
from timeline import format_instant


@dataclass
class Fault:
    code: str
    message: str
    fields: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"errorCode": self.code, "errorMessage": self.message, **self.fields}

    @property
    def error_msg(self) -> str:
        """The task status's errorMsg, as MSQ words it: code, then message."""
        return f"{self.code}: {self.message}"


def fault_of(error: BaseException, data_source: str) -> Fault:
    message = str(error)
    if isinstance(error, TooManyParseExceptions):
        return Fault(
            "TooManyWarnings",
            message,
            {"maxWarnings": error.limit, "rootErrorCode": "CannotParseExternalData"},
        )
    if isinstance(error, InsertTimeNull):
        return Fault("InsertTimeNull", message, {})
    if isinstance(error, InsertTimeOutOfBounds):
        return Fault(
            "InsertTimeOutOfBounds", message, {"interval": error.interval, "intervalBounds": error.bounds}
        )
    if isinstance(error, CannotAppend):
        return Fault("InsertCannotAllocateSegment", message, {"dataSource": data_source})
    if isinstance(error, MetadataStoreError) and "reaches outside" in message:
        return Fault("InsertCannotReplaceExistingSegment", message, {})
    if isinstance(error, NothingToIngest):
        return Fault("InsertCannotBeEmpty", f"No rows to insert for dataSource [{data_source}]",
                     {"dataSource": data_source})  # fmt: skip
    return Fault("UnknownError", message, {"message": message})


def msq_report(
    task_id: str,
    spec: dict[str, Any],
    started_ms: int,
    duration_ms: int,
    counts: dict[str, int],
    fault: Fault | None = None,
) -> dict[str, Any]:
    """`{"multiStageQuery": ...}` as Druid's task report API gives it."""
    start = format_instant(started_ms)
    phase = "FINISHED" if fault is None else "FAILED"
    timing = {"phase": phase, "workerCount": 1, "startTime": start, "duration": duration_ms}
    stages = [
        {"stageNumber": 0, "definition": _read_stage(task_id, spec["query"]), **timing},
        {
            "stageNumber": 1,
            "definition": _generator_stage(task_id, spec),
            **timing,
            "partitionCount": counts.get("segments", 0),
        },
    ]
    status: dict[str, Any] = {
        "status": "SUCCESS" if fault is None else "FAILED",
        "startTime": start,
        "durationMs": duration_ms,
        "pendingTasks": 0,
        "runningTasks": 1,
    }
    if fault is not None:
        status["errorReport"] = {"taskId": task_id, "stageNumber": 0, "error": fault.to_json()}
    payload = {"status": status, "stages": stages, "counters": _counters(counts)}
    return {"multiStageQuery": {"type": "multiStageQuery", "taskId": task_id, "payload": payload}}


def _read_stage(task_id: str, query: dict[str, Any]) -> dict[str, Any]:
    inputs = []
    for source in query["sources"].values():
        if source["type"] == "external":
            keys = ("inputSource", "inputFormat", "signature")
            inputs.append({"type": "external", **{k: source[k] for k in keys}})
        else:
            inputs.append({"type": "table", "dataSource": source["dataSource"]})
    statement = query.get("sql") or (query.get("rowStage") or {}).get("sql")
    processor = {"type": "scan" if query["mode"] == "rows" else "duckdb", "statement": statement}
    return {"id": f"{task_id}_0", "input": inputs, "processor": processor}


def _generator_stage(task_id: str, spec: dict[str, Any]) -> dict[str, Any]:
    processor = {
        "type": "segmentGenerator",
        "dataSchema": spec["ingestion"]["dataSchema"],
        "tuningConfig": spec["tuningConfig"],
    }
    return {"id": f"{task_id}_1", "input": [{"type": "stage", "stage": 0}], "processor": processor}


def _counters(counts: dict[str, int]) -> dict[str, Any]:
    rows_out, ingested = counts.get("rowsOut", 0), counts.get("rowsIngested", 0)
    reading = {
        "input0": {"type": "channel", "rows": [counts.get("rowsRead", 0)]},
        "output": {"type": "channel", "rows": [rows_out]},
        "warnings": {"type": "warnings", "CannotParseExternalData": counts.get("unparseable", 0)},
    }
    progress = {
        "type": "segmentGenerationProgress",
        "rowsProcessed": rows_out,
        "rowsPersisted": ingested,
        "rowsMerged": ingested,
    }
    segments = {"type": "segments", "published": counts.get("segments", 0)}
    return {"0": {"0": reading}, "1": {"0": {"segmentGenerationProgress": progress, "segments": segments}}}
