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

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import duckdb
import orjson
import pyarrow as pa
from sqlglot import exp

from strata.query.druid_types import MULTI_VALUE_STRING
from strata.query.errors import QueryUnsupported
from strata.sql.column_types import relational_arrow_type
from strata.sql.plan import Output, SqlPlan
from strata.sql.sandbox import BATCH_ROWS, ResultBatches, Rows
from strata.sql.sql_types import unnamed_column
from strata.sql.typing_rules import array_order, integer_division, sql_schema
from timeline import parse_instant

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
    outputs: list[Output] = field(default_factory=list)  # known once `start` ran
    time_zone: str | None = None  # sqlTimeZone: timestamps print in it
    names: list[str] | None = None  # the output columns' names, when the statement fixed them
    tables: dict[str, pa.Table] = field(default_factory=dict)  # tables known before any stage ran

    def start(
        self, conn: duckdb.DuckDBPyConnection, inputs: Sequence[tuple[Rows | pa.Table, list[Output]]]
    ) -> ResultBatches:
        """Run the outer statement on `conn` (a cursor of `strata.sql.sandbox.open_database`) over
        the stages' rows (or tables made for it, strata.sql.stage_tables); its answer streams from
        the batches returned. Blocks: a worker thread's."""
        from strata.sql.functions import to_duckdb

        tables = dict(self.tables)
        for stage, (rows, outputs) in zip(self.stages, inputs, strict=True):
            tables[stage.name] = rows if isinstance(rows, pa.Table) else _arrow(rows, outputs)
        for name, table in tables.items():
            conn.register(name, table)
        schemas = {name: table.schema for name, table in tables.items()}
        outer = integer_division(self.outer, schemas)
        # typed over the tables when integer_division left it untyped (ARRAY_TO_STRING of a string)
        statement = to_duckdb(outer, self.time_zone, schema=sql_schema(schemas))
        relation = conn.sql(statement.sql(dialect="duckdb"))
        if relation is None:
            raise QueryUnsupported("Only a SELECT runs in the broker's engine")
        reordered = array_order(statement, relation.columns, [str(kind) for kind in relation.types])
        if reordered is not None:  # an ARRAY in ORDER BY: its null elements first, as in Druid
            relation = conn.sql(reordered.sql(dialect="duckdb"))
        kinds = [str(kind) for kind in relation.types]
        self.outputs = [
            _output(i, (name, kind), self.outer, self.names)
            for i, (name, kind) in enumerate(zip(relation.columns, kinds, strict=True))
        ]
        return ResultBatches(relation.to_arrow_reader(BATCH_ROWS), kinds, self.time_zone)


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
            columns[out.name] = _values_array(values, out.druid_type)
    return pa.table(columns) if columns else pa.table({"_": pa.nulls(len(rows))})


_NON_FINITE = {text: float(text) for text in ("NaN", "Infinity", "-Infinity")}


def _values_array(values: list[Any], druid_type: str) -> pa.Array:
    """A stage's column for DuckDB: arrays as lists, a multi-value string as lists of its values
    (one value, printed as a string by the native answer, is a list of one), nested values as
    JSON text."""
    kind = druid_type
    if kind == "STRING" and any(isinstance(v, list) for v in values):
        kind = MULTI_VALUE_STRING  # a scan stage's multi-value column
    target = relational_arrow_type(kind)
    if pa.types.is_list(target):
        values = [v if v is None or isinstance(v, list) else [v] for v in values]
    elif isinstance(target, pa.JsonType):
        texts = [None if v is None else v if isinstance(v, str) else orjson.dumps(v).decode() for v in values]
        return pa.ExtensionArray.from_storage(target, pa.array(texts, pa.string()))
    elif pa.types.is_floating(target) and any(isinstance(v, str) for v in values):
        values = [_NON_FINITE.get(v, v) if isinstance(v, str) else v for v in values]  # Jackson's "NaN"
    try:
        return pa.array(values, target)
    except (pa.ArrowInvalid, pa.ArrowTypeError):  # mixed kinds: compare as text, as Druid would
        return pa.array([None if v is None else str(v) for v in values], pa.string())


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


def _druid_of(duck: str) -> str:
    """The Druid type of a DuckDB result column type (`BIGINT[]` is ARRAY<LONG>)."""
    if duck.endswith("[]"):
        element = _druid_of(duck[:-2])
        return f"ARRAY<{'DOUBLE' if element == 'FLOAT' else element}>"
    if duck == "JSON":
        return "COMPLEX<json>"
    return _DUCK_TO_DRUID.get(duck.split("(")[0], "STRING")


def _output(i: int, description: Any, outer: exp.Expr, names: list[str] | None) -> Output:
    name, kind = description[0], str(description[1]).upper()
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
    return Output(name, name, _druid_of(kind))
