"""Druid SQL to native queries, as Druid's planner would write them for the common shapes.

Aggregations grouped only by a time floor become a timeseries (empty buckets skipped, as Druid
SQL does); other aggregations a groupBy; plain selections a scan. The rows of the native answer
are then projected, ordered, offset and limited by `SqlPlan.rows` (`strata.sql.plan`);
aggregations are planned by `strata.sql.aggregation`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from strata.query.errors import QueryUnsupported, invalid
from strata.sql.aggregation import Aggregation
from strata.sql.column_types import planner_type
from strata.sql.dialect import DIALECT
from strata.sql.engine_errors import engine_error
from strata.sql.expressions import ExpressionWriter, is_time_expression
from strata.sql.filters import TIME, column_name, literal, now_millis, split_time, to_filter
from strata.sql.plan import (
    Output,
    SqlPlan,
    VirtualColumns,
    expression_filter,
    expression_output,
    output_index,
)
from strata.sql.session import current_zone
from strata.sql.sql_types import unnamed_column

EXPLAIN = re.compile(r"(^|;)\s*EXPLAIN\s+PLAN\s+FOR\s+", re.IGNORECASE)


@dataclass
class Parsed:
    """One statement: its tree, whether EXPLAIN PLAN FOR asked for its plan, and the context
    set by the `SET key = value;` statements before it (Druid 31+)."""

    tree: exp.Expr
    explain: bool
    settings: dict[str, Any]


def parse(sql: str) -> tuple[exp.Expr, bool]:
    parsed = parse_statement(sql)
    return parsed.tree, parsed.explain


def parse_statement(sql: str) -> Parsed:
    explain = bool(EXPLAIN.search(sql))
    text = EXPLAIN.sub(r"\1 ", sql).strip()
    try:
        statements = [s for s in sqlglot.parse(text, read=DIALECT) if s is not None]
    except SqlglotError as e:  # worded as Druid words it: where, and near what, never sqlglot's classes
        raise engine_error(e) from None
    settings: dict[str, Any] = {}
    while len(statements) > 1 and isinstance(head := statements[0], exp.Set):
        settings.update(settings_of(head))
        statements.pop(0)
    if len(statements) != 1:
        raise invalid("SQL must be exactly one statement, optionally after SET statements")
    if isinstance(statements[0], exp.Set):
        raise invalid("SQL has SET statements but no statement to run after them")
    return Parsed(_plain_negations(statements[0]), explain, settings)


def _plain_negations(tree: exp.Expr) -> exp.Expr:
    """`x NOT LIKE p` as `NOT (x LIKE p)`: sqlglot marks a negated LIKE with a flag that the
    planners, written for the NOT node, would not see."""
    for node in list(tree.find_all(exp.Like, exp.ILike)):
        if node.args.get("negate"):
            node.set("negate", None)
            node.replace(exp.Not(this=node.copy()))
    return tree


def settings_of(statement: exp.Set) -> dict[str, Any]:
    """The context a `SET key = value[, ...]` statement sets."""
    out: dict[str, Any] = {}
    for item in statement.expressions:
        assignment = item.this if isinstance(item, exp.SetItem) else item
        if not isinstance(assignment, exp.EQ) or not isinstance(assignment.this, exp.Column):
            raise invalid("SET takes the form SET key = value, got [%s]", item.sql(dialect=DIALECT))
        value = assignment.expression
        if isinstance(value, exp.Boolean):
            out[assignment.this.name] = bool(value.this)
        elif isinstance(value, exp.Literal) and not value.is_string:
            out[assignment.this.name] = literal(value, 0)
        elif isinstance(value, (exp.Literal, exp.Null)):
            out[assignment.this.name] = None if isinstance(value, exp.Null) else value.this
        else:
            raise invalid("SET [%s] needs a literal value", assignment.this.name)
    return out


def plan_select(
    select: exp.Select, data_source: str, columns: Mapping[str, str], context: Mapping[str, Any]
) -> SqlPlan:
    """Plan a SELECT over one datasource whose columns (name -> Druid type) are known."""
    now = now_millis()
    where = select.args.get("where")
    intervals, condition = split_time(None if where is None else where.this, now)
    columns = {name: planner_type(kind) for name, kind in columns.items()}  # Druid SQL: MV is VARCHAR
    types = dict(columns)
    native: dict[str, Any] = {"dataSource": data_source, "intervals": intervals}
    writer = ExpressionWriter(now)
    if condition is not None:
        native["filter"] = to_filter(condition, types, now, expression_filter(writer))
    native["context"] = {k: v for k, v in context.items() if k not in ("sqlTimeZone",)}
    group = select.args.get("group")
    items = _select_items(select, columns)
    aggregating = group is not None or any(it.find(exp.AggFunc) for _, it in items)
    if select.args.get("distinct") and not aggregating:
        group = exp.Group(expressions=[it for _, it in items])
        aggregating = True
    virtual = VirtualColumns(types)
    builder = Aggregation(types, now, virtual, writer) if aggregating else None
    outputs: list[Output] = []
    if builder is None:
        plan = _scan(select, items, native, columns, outputs, virtual, writer)
    else:
        plan = builder.plan(select, items, group, native, outputs)
    if virtual.specs:
        native["virtualColumns"] = virtual.specs
    _order_and_limit(select, plan, items)
    plan.time_zone = current_zone()
    return plan


def _select_items(select: exp.Select, columns: Mapping[str, str]) -> list[tuple[str, exp.Expr]]:
    items: list[tuple[str, exp.Expr]] = []
    for i, e in enumerate(select.expressions):
        if isinstance(e, exp.Star):
            names = [TIME, *(c for c in columns if c != TIME)]
            items += [(c, exp.column(c, quoted=True)) for c in names]
            continue
        inner = e.this if isinstance(e, exp.Alias) else e
        name = (
            e.alias
            if isinstance(e, exp.Alias)
            else (inner.name if isinstance(inner, exp.Column) else unnamed_column(select.expressions, i))
        )
        items.append((name, inner))
    return items


def _scan(
    select: exp.Select,
    items: list[tuple[str, exp.Expr]],
    native: dict[str, Any],
    columns: Mapping[str, str],
    outputs: list[Output],
    virtual: VirtualColumns,
    writer: ExpressionWriter,
) -> SqlPlan:
    for name, node in items:
        col = column_name(node)
        if col is None:
            text = writer.write(node)
            source, kind = virtual.add(text)
            outputs.append(expression_output(name, source, kind, node, is_time_expression(text)))
            continue
        if col not in columns and col != TIME:
            raise invalid("Column '%s' not found in any table", col)
        outputs.append(Output(name, col, columns.get(col, "LONG")))
    native.update(
        queryType="scan", columns=list(dict.fromkeys(o.source for o in outputs)), resultFormat="compactedList"
    )
    order = select.args.get("order")
    if order is not None:
        keys = order.expressions
        if len(keys) != 1 or column_name(keys[0].this) != TIME:
            raise QueryUnsupported("A non-aggregating query can only be ordered by __time")
        native["order"] = "descending" if keys[0].args.get("desc") else "ascending"
        if TIME not in native["columns"]:  # ordered by time without selecting it
            native["columns"].append(TIME)
        select.set("order", None)
    limit, offset = _limit(select)
    if limit is not None:
        native["limit"] = limit
    if offset:
        native["offset"] = offset
    select.set("limit", None)
    select.set("offset", None)
    return SqlPlan(outputs, native)


def _limit(select: exp.Select) -> tuple[int | None, int]:
    limit = select.args.get("limit")
    offset = select.args.get("offset")
    n = int(literal(limit.expression, 0)) if limit is not None else None
    skip = int(literal(offset.expression, 0)) if offset is not None else 0
    return n, skip


def _order_and_limit(select: exp.Select, plan: SqlPlan, items: list[tuple[str, exp.Expr]]) -> None:
    order = select.args.get("order")
    if order is not None:
        for key in order.expressions:
            plan.order.append((output_index(key.this, plan.outputs, items), bool(key.args.get("desc"))))
    plan.limit, plan.offset = _limit(select)
