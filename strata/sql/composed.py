"""Statements answered in several native steps, as Druid's broker answers them.

Druid plans a subquery it cannot fold into one native query as a `query` datasource: the inner
query runs on the data nodes and the broker computes the outer one over the inner rows in memory.
Here the same: each inner SELECT is planned to native (`SqlPlan`) and run through the broker's
path; the outer statement runs on the broker over the inner rows with DuckDB. That covers
aggregating subqueries in FROM, `UNION ALL` at the top level and exact `COUNT(DISTINCT ...)`.
`IN (subquery)` runs the subquery first and plans the outer query with its values as a list, so
the outer query stays one native query on the data nodes.
"""

from __future__ import annotations

import datetime
import decimal
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any
from zoneinfo import ZoneInfo

import duckdb
import orjson
import pyarrow as pa
from sqlglot import exp

from strata.sql.engine_errors import engine_error
from strata.sql.plan import Output, SqlPlan
from strata.sql.sql_types import unnamed_column
from strata.sql.typing_rules import integer_division
from timeline import format_instant, parse_instant

Rows = list[list[Any]]
_stage_numbers = itertools.count()


def stage_name() -> str:
    """A fresh table name for the rows of one stage in the broker's engine."""
    return f"__stage{next(_stage_numbers)}"


def aliased_table(name: str, alias: str | None) -> exp.Table:
    """`name AS "alias"` in FROM (a table alias, as qualification expects)."""
    table = exp.to_table(name)
    if alias:
        table.set("alias", exp.TableAlias(this=exp.to_identifier(alias, quoted=True)))
    return table


@dataclass
class Stage:
    name: str  # the table name the outer statement reads
    plan: Plan


@dataclass
class ComposedPlan:
    """An outer statement run with DuckDB over the rows of native stages."""

    stages: list[Stage]
    outer: exp.Expr  # the statement, reading the stages by name
    outputs: list[Output] = field(default_factory=list)  # known once `finish` ran
    time_zone: str | None = None  # sqlTimeZone: timestamps print in it
    names: list[str] | None = None  # the output columns' names, when the statement fixed them
    tables: dict[str, pa.Table] = field(default_factory=dict)  # tables known before any stage ran

    def finish(self, inputs: Sequence[tuple[Rows, list[Output]]]) -> Rows:
        from strata.sql.functions import install, to_duckdb

        conn = duckdb.connect()
        try:
            conn.execute("SET TimeZone='UTC'")
            # Druid orders null below every value: first ascending, last descending
            conn.execute("SET default_null_order='nulls_first_on_asc_last_on_desc'")
            install(conn)
            tables = dict(self.tables)
            for stage, (rows, outputs) in zip(self.stages, inputs, strict=True):
                tables[stage.name] = _arrow(rows, outputs)
            for name, table in tables.items():
                conn.register(name, table)
            outer = integer_division(self.outer, {name: table.schema for name, table in tables.items()})
            try:
                cur = conn.execute(to_duckdb(outer, self.time_zone).sql(dialect="duckdb"))
            except duckdb.Error as e:
                raise engine_error(e) from None
            description = cur.description or []
            result = [list(r) for r in cur.fetchall()]
        finally:
            conn.close()
        self.outputs = [_output(i, d, self.outer, self.names) for i, d in enumerate(description)]
        zone = None if self.time_zone is None else ZoneInfo(self.time_zone)
        for row in result:
            for i, value in enumerate(row):
                if isinstance(value, datetime.datetime):
                    aware = value if value.tzinfo is not None else value.replace(tzinfo=datetime.UTC)
                    row[i] = format_instant(round(aware.timestamp() * 1000), zone)
                elif isinstance(value, datetime.date):  # a DATE prints as its midnight in the zone
                    midnight = datetime.datetime(
                        value.year, value.month, value.day, tzinfo=zone or datetime.UTC
                    )
                    row[i] = format_instant(round(midnight.timestamp() * 1000), zone)
                elif isinstance(value, decimal.Decimal):
                    row[i] = float(value)
        return result


@dataclass
class DeferredPlan:
    """A plan that needs the rows of `stages` first (an IN subquery's values)."""

    stages: list[Stage]
    build: Callable[[Sequence[Rows]], Plan]
    outputs: list[Output] = field(default_factory=list)


Plan = SqlPlan | ComposedPlan | DeferredPlan


def natives(plan: Plan) -> list[dict[str, Any]]:
    """Every native query a plan runs (what EXPLAIN shows), inner ones first."""
    if isinstance(plan, SqlPlan):
        return [plan.native] if plan.native is not None else []
    return [q for stage in plan.stages for q in natives(stage.plan)]


def broker_parts(plan: Plan) -> list[dict[str, Any]]:
    """What the broker computes itself over the stages' rows (EXPLAIN shows it after the native
    queries): the statement its engine runs and the stages it reads, inner ones first."""
    if isinstance(plan, SqlPlan):
        return []
    inner = [part for stage in plan.stages for part in broker_parts(stage.plan)]
    if isinstance(plan, DeferredPlan):
        return [
            *inner,
            {"engine": "broker", "statement": "the outer query, planned once its IN list is known"},
        ]
    return [
        *inner,
        {
            "engine": "broker",
            "statement": plan.outer.sql(dialect="druid"),
            "stages": [stage.name for stage in plan.stages],
        },
    ]


_ARROW = {"STRING": pa.string(), "LONG": pa.int64(), "DOUBLE": pa.float64(), "FLOAT": pa.float32()}


def _arrow(rows: Rows, outputs: list[Output]) -> pa.Table:
    columns: dict[str, pa.Array] = {}
    for i, out in enumerate(outputs):
        values = [r[i] for r in rows]
        if out.sql_type == "TIMESTAMP":
            millis = [
                None if v is None else v if isinstance(v, int) else parse_instant(str(v)) for v in values
            ]
            # DuckDB's TIMESTAMP is microseconds (a TIMESTAMP_MS column fails some of its casts)
            stamps = pa.array(millis, pa.int64()).cast(pa.timestamp("ms"))
            columns[out.name] = stamps.cast(pa.timestamp("us"))
        elif out.sql_type == "BOOLEAN":
            columns[out.name] = pa.array([None if v is None else bool(v) for v in values], pa.bool_())
        else:
            columns[out.name] = _column(values, out.druid_type)
    return pa.table(columns) if columns else pa.table({"_": pa.nulls(len(rows))})


_ELEMENTS = {"ARRAY<STRING>": pa.string(), "ARRAY<LONG>": pa.int64(), "ARRAY<DOUBLE>": pa.float64()}


def _column(values: list[object], druid_type: str) -> pa.Array:
    """A subquery's values of one column: arrays as lists, a multi-value string's rows as lists
    of strings (a single value as a one-element list) so MV functions and UNNEST still read them,
    nested values as their JSON text."""
    if druid_type in _ELEMENTS:
        return pa.array(values, pa.list_(_ELEMENTS[druid_type]))
    if druid_type == "STRING" and any(isinstance(v, list) for v in values):
        return pa.array(
            [v if v is None or isinstance(v, list) else [v] for v in values], pa.list_(pa.string())
        )
    if druid_type == "COMPLEX<json>" and any(isinstance(v, (list, dict)) for v in values):
        return pa.array(
            [orjson.dumps(v).decode() if isinstance(v, (list, dict)) else v for v in values], pa.string()
        )
    return pa.array(values, _ARROW.get(druid_type, pa.string()))


_DUCK_TO_DRUID = {
    "VARCHAR": "STRING",
    "BIGINT": "LONG",
    "INTEGER": "LONG",
    "HUGEINT": "LONG",
    "SMALLINT": "LONG",
    "TINYINT": "LONG",
    "DOUBLE": "DOUBLE",
    "FLOAT": "FLOAT",
    "DECIMAL": "DOUBLE",
    "BOOLEAN": "LONG",
}


def _output(i: int, description: Any, outer: exp.Expr, names: list[str] | None) -> Output:
    name, kind = description[0], str(description[1]).split("(")[0].upper()
    if names is not None and i < len(names):
        name = names[i]
    else:
        select = outer if isinstance(outer, exp.Select) else outer.find(exp.Select)
        items = select.expressions if select is not None else []
        item = items[i] if i < len(items) else None
        if item is not None and not isinstance(item, (exp.Alias, exp.Column, exp.Star)):
            name = unnamed_column(items, i)
    if kind.startswith("TIMESTAMP"):
        return Output(name, name, "LONG", timestamp=True)
    if kind == "DATE":
        return Output(name, name, "LONG", sql_type_name="DATE")
    if kind == "BOOLEAN":
        return Output(name, name, "LONG", sql_type_name="BOOLEAN")
    return Output(name, name, _DUCK_TO_DRUID.get(kind, "STRING"))
