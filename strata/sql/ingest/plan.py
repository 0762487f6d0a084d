"""INSERT and REPLACE planned into the task the coordinator runs (`query_controller`, as Druid's MSQ).

The SELECT is qualified against its sources (the table functions' signatures and the data
sources' columns), then planned one of two ways (`strata.sql.ingest.shape`):

- rows: one source, row-level work (and rollup-able aggregations): the task runs a DuckDB
  statement over each block of input as it reads it (`strata.ingestion.row_stage`), locally or in
  Spark tasks, and the segment build rolls up; a SELECT that only picks and renames columns (with
  `TIME_PARSE` for `__time`) runs no DuckDB at all, so it costs what a native spec costs.
- whole: anything else; the task runs the whole statement with DuckDB over its sources and builds
  segments from its result.

Either way the segments are described by a native ingestion spec (`dataSchema`, `ioConfig`,
`tuningConfig`, as MSQ's segment generator writes it), which the task payload carries with the
statement, so the coordinator checks it as it checks every spec.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson
import sqlglot
from sqlglot import exp
from sqlglot.errors import OptimizeError, SqlglotError
from sqlglot.optimizer.eliminate_ctes import eliminate_ctes
from sqlglot.optimizer.merge_subqueries import merge_subqueries
from sqlglot.optimizer.qualify import qualify

from strata.query.errors import invalid
from strata.sql.dialect import DIALECT
from strata.sql.engine_errors import engine_error
from strata.sql.ingest.checks import check_context, check_outputs, check_query, check_target, check_time, flag
from strata.sql.ingest.clauses import IngestStatement, split_statement
from strata.sql.ingest.columns import (
    TIME,
    Column,
    duckdb_sql,
    result_columns,
    signature_of,
    stored_as_written,
)
from strata.sql.ingest.layout import Layout, layout_of
from strata.sql.ingest.rows import RowPlan, row_plan
from strata.sql.ingest.shape import Metric, aggregating, items_of, row_shape
from strata.sql.ingest.targets import ALL, overwrite_intervals, replace_json, segment_granularity
from strata.sql.relational import output_names
from strata.sql.session import parse_time_zone
from timeline import ETERNITY, Interval

TASK_TYPE = "query_controller"
SYSTEM_SCHEMAS = ("sys", "information_schema")
_DRUID_TYPES = ("STRING", "LONG", "FLOAT", "DOUBLE")


class TableCatalog(Protocol):
    def columns(self, table: str) -> Mapping[str, str] | None:
        """Column name -> Druid type of a data source (`__time` among them); None: no such table."""


@dataclass
class IngestPlan:
    statement: IngestStatement
    task: dict[str, Any]
    reads: tuple[str, ...]  # data sources the SELECT reads
    inputs: tuple[str, ...]  # input source types read through table functions
    columns: list[Column] = field(default_factory=list)

    @property
    def task_id(self) -> str:
        return str(self.task["id"])

    def explain_rows(self) -> list[list[str]]:
        """Druid's EXPLAIN PLAN FOR an INSERT or REPLACE: PLAN, RESOURCES, ATTRIBUTES."""
        spec = self.task["spec"]
        plan = [{"query": spec["query"], "ingestion": spec["ingestion"],
                 "signature": [{"name": c.name, "type": c.sql_type} for c in self.columns],
                 "columnMappings": spec["columnMappings"]}]  # fmt: skip
        resources = [{"name": "EXTERNAL", "type": "EXTERNAL"}] if self.inputs else []
        resources += [{"name": n, "type": "DATASOURCE"} for n in sorted({*self.reads, self.statement.target})]
        destination = spec["destination"]
        attributes: dict[str, Any] = {"statementType": self.statement.operation,
                                      "targetDataSource": self.statement.target,
                                      "partitionedBy": destination["segmentGranularity"]}  # fmt: skip
        if self.statement.clustered_by:
            attributes["clusteredBy"] = spec["ingestion"]["dataSchema"]["dimensionsSpec"].get(
                "clusteredBy", []
            )
        if self.statement.operation == "REPLACE":
            attributes["replaceTimeChunks"] = destination["replaceTimeChunks"]
        return [[orjson.dumps(x).decode() for x in (plan, resources, attributes)]]


def plan_ingest(
    sql: str, catalog: TableCatalog, context: Mapping[str, Any], *, query_id: str, now_ms: int | None = None
) -> IngestPlan:
    """The task running an INSERT or REPLACE; Druid's errors (400) for a statement it cannot run."""
    try:
        return _plan(
            sql, catalog, context, query_id, now_ms if now_ms is not None else int(time.time() * 1000)
        )
    except (OptimizeError, SqlglotError) as e:
        raise engine_error(e) from None
    except (ValueError, TypeError, KeyError, AttributeError, IndexError) as e:
        raise invalid("Cannot plan the SQL statement: %s: %s", type(e).__name__, e) from None


def _plan(
    sql: str, catalog: TableCatalog, context: Mapping[str, Any], query_id: str, now_ms: int
) -> IngestPlan:
    st = split_statement(sql)
    ctx = {**context, **st.settings}
    check_context(ctx, st.operation)
    check_target(st)
    zone = parse_time_zone(ctx.get("sqlTimeZone"))
    granularity = segment_granularity(st.partitioned_by, st.text)
    intervals: list[Interval] | None = None
    if st.overwrite == "ALL":
        intervals = [ETERNITY]
    elif st.overwrite is not None:
        intervals = overwrite_intervals(st.overwrite, granularity, zone, now_ms)
    tree = sqlglot.parse_one(st.query, read=DIALECT)
    check_query(tree, st.operation, granularity)
    tables = _sources(tree, st, catalog)
    tree = _qualified(tree, tables)
    check_outputs([name for name, _ in items_of_query(tree)])
    rollup = aggregating_query(tree) and not flag(ctx, "finalizeAggregations", True)
    rollup = rollup and not flag(ctx, "groupByEnableMultiValueUnnesting", False)
    shape = row_shape(tree, rollup)
    rows: RowPlan | None = None
    if shape is not None:
        rows = row_plan(shape, tables, zone, now_ms)
        columns, metrics, sql_whole = rows.columns, shape.metrics, None
    else:
        sql_whole, columns, metrics = _whole(tree, tables, zone, rollup)
    check_time(columns, granularity)
    layout = layout_of(st, granularity, columns, metrics, tree, rollup, ctx)
    task = _task(st, ctx, query_id, granularity, intervals, tables, rows, sql_whole, layout)
    task["sqlQuery"] = sql
    reads = tuple(sorted({t["dataSource"] for t in tables.values() if t["type"] == "table"}))
    inputs = tuple(sorted({str(e.input_source["type"]) for e in st.externals.values()}))
    return IngestPlan(st, task, reads, inputs, layout.outputs)


def items_of_query(tree: exp.Expr) -> list[tuple[str, exp.Expr]]:
    select = tree if isinstance(tree, exp.Select) else tree.find(exp.Select)
    return items_of(select) if select is not None else []


def aggregating_query(tree: exp.Expr) -> bool:
    return isinstance(tree, exp.Select) and aggregating(tree)


# -- sources -----------------------------------------------------------------------------------------
def _sources(tree: exp.Expr, st: IngestStatement, catalog: TableCatalog) -> dict[str, dict[str, Any]]:
    """Every table the query reads, by the name its statement uses: external tables and data sources
    (with their signatures)."""
    ctes = {cte.alias_or_name for cte in tree.find_all(exp.CTE)}
    out: dict[str, dict[str, Any]] = {}
    for name, table in st.externals.items():
        out[name] = {**table.to_json(), "function": table.function}
    for node in tree.find_all(exp.Table):
        if not node.name or node.name in ctes or node.name in out:
            continue
        schema = (node.db or "druid").lower()
        if schema in SYSTEM_SCHEMAS:
            raise invalid("Cannot query table(s) [%s.%s] with SQL engine [msq-task]", node.db, node.name)
        if schema != "druid":
            raise invalid("Object '%s.%s' not found", node.db, node.name)
        columns = catalog.columns(node.name)
        if columns is None:
            raise invalid("Object '%s' not found", node.name)
        signature = [
            (c, "TIMESTAMP" if c == TIME else t) for c, t in columns.items() if c == TIME or t in _DRUID_TYPES
        ]
        out[node.name] = {"type": "table", "dataSource": node.name,
                          "signature": [{"name": c, "type": t} for c, t in signature]}  # fmt: skip
    return out


def _qualified(tree: exp.Expr, tables: Mapping[str, Mapping[str, Any]]) -> exp.Expr:
    tree = tree.copy()
    output_names(tree)
    schema: dict[str, object] = {
        "druid": {name: {c: _sql(t) for c, t in signature_of(src)} for name, src in tables.items()}
    }
    try:
        qualified = qualify(tree, schema=schema, db="druid", dialect=DIALECT, quote_identifiers=True,
                            identify=True, validate_qualify_columns=True)  # fmt: skip
    except OptimizeError as e:
        raise invalid("%s", " ".join(str(e).split())) from None
    return eliminate_ctes(merge_subqueries(qualified))


def _sql(kind: str) -> str:
    return {"STRING": "VARCHAR", "LONG": "BIGINT", "FLOAT": "FLOAT", "DOUBLE": "DOUBLE"}.get(
        kind, "TIMESTAMP"
    )


# -- whole statements --------------------------------------------------------------------------------
def _whole(
    tree: exp.Expr, tables: Mapping[str, Mapping[str, Any]], zone: str | None, rollup: bool
) -> tuple[str, list[Column], list[Metric]]:
    """The statement run whole by DuckDB over its sources, each under its own name; with rollup its
    plain COUNT / SUM / MIN / MAX outputs become the metrics combining them (as MSQ's rollup keeps
    an aggregation's combining factory), the rest dimensions."""
    tree = tree.copy()
    for node in list(tree.find_all(exp.Table)):
        if node.name in tables:
            alias = node.args.get("alias")
            node.replace(exp.Table(this=exp.to_identifier(node.name, quoted=True), alias=alias))
    signatures = {name: signature_of(src) for name, src in tables.items()}
    sql = duckdb_sql(tree, signatures, zone)
    columns = result_columns(sql, signatures)
    metrics: list[Metric] = []
    if rollup:
        for name, item in items_of_query(tree):
            function = item.key.upper() if isinstance(item, (exp.Count, exp.Sum, exp.Min, exp.Max)) else ""
            if function and not isinstance(item.this, exp.Distinct):
                metrics.append(Metric("SUM" if function == "COUNT" else function, name, name))
    return stored_as_written(sql, columns), columns, metrics


# -- the task ----------------------------------------------------------------------------------------
def _task(
    st: IngestStatement,
    ctx: Mapping[str, Any],
    query_id: str,
    granularity: str,
    intervals: list[Interval] | None,
    tables: Mapping[str, Mapping[str, Any]],
    rows: RowPlan | None,
    sql_whole: str | None,
    layout: Layout,
) -> dict[str, Any]:
    name = "all" if granularity == ALL else granularity
    segment_json = {"type": "all"} if granularity == ALL else name
    query: dict[str, Any] = {"mode": "rows" if rows is not None else "whole", "sources": dict(tables)}
    if rows is not None:
        query["rowStage"] = rows.to_json()
    else:
        query["sql"] = sql_whole
    io: dict[str, Any] = {"type": "index_parallel", "appendToExisting": st.operation == "INSERT"}
    if rows is not None:
        io |= rows.io_config(tables)
    ingestion = {
        "dataSchema": {**layout.data_schema(st.target), "granularitySpec": {
            "segmentGranularity": segment_json, "queryGranularity": layout.query_granularity,
            "rollup": layout.rollup,
            "intervals": [str(iv) for iv in intervals] if intervals and intervals != [ETERNITY] else []}},
        "ioConfig": io,
        "tuningConfig": {"type": "index_parallel", "partitionsSpec": layout.partitions,
                         "maxParseExceptions": layout.max_parse_exceptions},
    }  # fmt: skip
    sql_context = {
        **ctx,
        "sqlQueryId": query_id,
        "sqlInsertSegmentGranularity": orjson.dumps(segment_json).decode(),
    }
    if st.operation == "REPLACE":
        sql_context["sqlReplaceTimeChunks"] = replace_json(intervals)
    lock_keys = ("priority", "taskLockType", "useConcurrentLocks", "useSharedLock", "taskLockTimeout")
    task_context = {k: ctx[k] for k in lock_keys if k in ctx}
    if st.operation == "INSERT" and not any(k in ctx for k in lock_keys[1:4]):
        task_context["taskLockType"] = "SHARED"  # MSQ's default for INSERT; REPLACE locks EXCLUSIVE
    return {
        "type": TASK_TYPE,
        "id": f"query-{query_id}",
        "spec": {
            "query": query,
            "columnMappings": [{"queryColumn": c.name, "outputColumn": c.name} for c in layout.outputs],
            "destination": {"type": "dataSource", "dataSource": st.target, "segmentGranularity": segment_json,
                            "replaceTimeChunks": None if intervals is None else replace_json(intervals)},
            "assignmentStrategy": "max",
            "tuningConfig": {"maxNumWorkers": max(1, int(ctx.get("maxNumTasks", 2) or 2) - 1),
                             "maxRowsInMemory": 100000, "rowsPerSegment": layout.rows_per_segment},
            "ingestion": ingestion,
            "failOnEmptyInsert": flag(ctx, "failOnEmptyInsert", False),
        },
        "sqlQueryContext": sql_context,
        "sqlResultsContext": {"timeZone": zone_name(ctx), "serializeComplexValues": True,
                              "stringifyArrays": True},
        "sqlTypeNames": [c.sql_type for c in layout.outputs],
        "nativeTypeNames": [c.kind.upper() if c.kind != "timestamp" else "LONG" for c in layout.outputs],
        "context": task_context,
    }  # fmt: skip


def zone_name(ctx: Mapping[str, Any]) -> str:
    return str(ctx.get("sqlTimeZone") or "UTC")
