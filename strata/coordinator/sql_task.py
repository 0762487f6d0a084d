"""Druid's `query_controller` task: an INSERT or REPLACE the broker planned (`strata.sql.ingest`),
run in the task's own process on the local engine or Spark, holding the task's interval locks.

The payload carries the statement, its plan and the native ingestion spec of the segments it
writes. The plan runs one of two ways:

- rows: the ingestion reads the source (input source, or a data source's visible segments) and
  runs the statement's per-row stage on each block (`strata.ingestion.row_stage`), so the engine's
  read tasks, Spark's included, do that work side by side;
- whole: DuckDB runs the statement over every source (`sql_whole`), and the ingestion builds the
  segments from its staged result.

An INSERT appends (under a SHARED lock unless the context names another); a REPLACE drops the used
segments inside its OVERWRITE intervals in the very publish that adds its own (`Replacement`), so
readers see the old rows or the new ones, never neither. As MSQ: a row without a time fails the
task (InsertTimeNull), so does a REPLACE row outside its intervals (InsertTimeOutOfBounds); a
statement that yields no rows is a success publishing nothing (a REPLACE: only the drops) unless
`failOnEmptyInsert`. Nothing is published before the one transaction at the end.
"""

from __future__ import annotations

import dataclasses
import shutil
import time
from collections.abc import Mapping
from typing import Any

from strata.coordinator.index_task import ingest_guarded
from strata.coordinator.sql_report import fault_of, msq_report
from strata.coordinator.task_context import TaskContext, TaskFailed
from strata.coordinator.task_types import InvalidTask, TaskPlan
from strata.ingestion.errors import IngestionError, SpecError
from strata.ingestion.fetch import InputStorage, S3Settings
from strata.ingestion.row_stage import RowStage
from strata.ingestion.spec import IngestionSpec, parse_spec
from strata.storage import open_deep_storage
from strata.storage.metadata_store import MetadataStoreError
from timeline import ETERNITY, Interval

PRIORITY = 50  # Druid's default for batch ingestion tasks


def _spec_json(body: Mapping[str, Any]) -> dict[str, Any]:
    spec = body.get("spec")
    if not isinstance(spec, dict) or not isinstance(spec.get("ingestion"), dict):
        raise InvalidTask("a query_controller task needs 'spec' with the statement's plan ('spec.ingestion')")
    return spec


def _replace_intervals(destination: Mapping[str, Any]) -> tuple[Interval, ...] | None:
    chunks = destination.get("replaceTimeChunks")
    if chunks is None:
        return None
    if chunks == "all":
        return (ETERNITY,)
    try:
        return tuple(Interval.parse(str(c)) for c in chunks)
    except (ValueError, TypeError) as e:
        raise InvalidTask(f"Invalid value for field [replaceTimeChunks]: {e}") from None


def plan_query(body: Mapping[str, Any]) -> TaskPlan:
    """The task's data source, what it locks (a REPLACE its OVERWRITE intervals; an INSERT, which may
    write anywhere, the whole timeline), and what it reads (authorized at submission)."""
    spec = _spec_json(body)
    destination = spec.get("destination") or {}
    ds = destination.get("dataSource")
    if not isinstance(ds, str) or not ds:
        raise InvalidTask("a query_controller task needs 'spec.destination.dataSource'")
    replaced = _replace_intervals(destination)
    query = spec.get("query") or {}
    sources = query.get("sources") or {}
    if query.get("mode") not in ("rows", "whole") or not isinstance(sources, dict):
        raise InvalidTask("a query_controller task needs 'spec.query' with its mode and sources")
    try:
        build_spec(spec, None)
    except SpecError as e:
        raise InvalidTask(str(e)) from None
    reads = tuple(sorted({str(s.get("dataSource")) for s in sources.values() if s.get("type") == "table"}))
    external = tuple(sorted({str((s.get("inputSource") or {}).get("type")) for s in sources.values()
                             if s.get("type") == "external"}))  # fmt: skip
    intervals = None if replaced is None or replaced == (ETERNITY,) else replaced
    return TaskPlan(ds, intervals, replaces=replaced is not None, reads=reads, external=external)


def build_spec(spec: Mapping[str, Any], input_override: Mapping[str, Any] | None) -> IngestionSpec:
    """The ingestion that builds the statement's segments (the whole-statement run reads its staged
    result instead of a source: `input_override`)."""
    ingestion = dict(spec["ingestion"])
    io = dict(ingestion.get("ioConfig") or {})
    if input_override is not None:
        io |= input_override
    elif "inputSource" not in io:  # a whole statement's input is known once it ran
        io |= {"inputSource": {"type": "inline", "data": ""}, "inputFormat": {"type": "parquet"}}
    parsed = parse_spec({**ingestion, "ioConfig": io})
    query = spec["query"]
    stage = None
    if query["mode"] == "rows":
        from strata.sql.functions import install

        rows = query["rowStage"]
        stage = RowStage(
            signature=tuple((str(n), str(t)) for n, t in rows["signature"]),
            time_parsed=tuple((str(a), str(b)) for a, b in rows.get("timeParsed") or ()),
            sql=rows.get("sql"),
            columns=tuple((str(a), str(b)) for a, b in rows.get("columns") or ()),
            setup=install,
        )
    fmt = parsed.input_format
    if stage is not None:  # VARCHAR columns as their text, whatever it looks like
        fmt = dataclasses.replace(fmt, text_fields=tuple(n for n, t in stage.signature if t == "STRING"))
    return dataclasses.replace(
        parsed,
        input_format=fmt,
        row_stage=stage,
        strict_time=True,
        replace=_replace_intervals(spec.get("destination") or {}),
        allow_empty=not spec.get("failOnEmptyInsert", False),
    )


def run(ctx: TaskContext) -> dict[str, Any]:
    spec = ctx.payload["spec"]
    data_source = str(spec["destination"]["dataSource"])
    started = int(time.time() * 1000)
    counts: dict[str, int] = {}
    s3 = S3Settings(ctx.s3_endpoint, ctx.s3_region)
    deep = open_deep_storage(ctx.deep_storage, s3_endpoint=ctx.s3_endpoint, s3_region=ctx.s3_region)
    scratch = deep.staging_dir()
    try:
        override = None
        if spec["query"]["mode"] == "whole":
            override = _run_whole(
                ctx, spec, InputStorage(scratch / "inputs", s3, deep, ctx.metadata), scratch, counts
            )
        summary = ingest_guarded(ctx, build_spec(spec, override), deep)
    except (IngestionError, MetadataStoreError) as e:
        fault = fault_of(e, data_source)
        report = msq_report(ctx.task_id, spec, started, int(time.time() * 1000) - started, counts, fault)
        raise TaskFailed(fault.error_msg, report) from None
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    counts |= {
        "rowsRead": counts.get("rowsRead", summary.rows_read),
        "rowsOut": summary.rows_read - summary.parse_errors - summary.rows_thrown_away,
        "rowsIngested": summary.rows_ingested,
        "unparseable": counts.get("unparseable", 0) + summary.parse_errors,
        "segments": len(summary.segments),
    }
    return msq_report(ctx.task_id, spec, started, int(time.time() * 1000) - started, counts)


def _run_whole(
    ctx: TaskContext, spec: Mapping[str, Any], storage: InputStorage, scratch: Any, counts: dict[str, int]
) -> dict[str, Any]:
    """Run the statement with DuckDB; the ioConfig reading its staged result."""
    from strata.coordinator.sql_whole import run_whole
    from strata.sql.functions import install

    limit = int(spec["ingestion"].get("tuningConfig", {}).get("maxParseExceptions", 0))
    staged = run_whole(spec["query"]["sql"], spec["query"]["sources"], storage, scratch, install, limit)
    counts |= {"rowsRead": staged.reading.rows, "unparseable": staged.reading.unparseable}
    return {"inputSource": {"type": "local", "files": [str(staged.path)]}, "inputFormat": {"type": "parquet"}}
