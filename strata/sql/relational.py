"""Statements that no single native query answers, planned relationally.

The statement is qualified against the catalog (sqlglot's `qualify`: aliases, `t.col`, `*`,
subquery and CTE columns). Every datasource it reads becomes a native stage, as Druid would push it
down: a subquery or CTE over one datasource that the native planner takes runs as that native
query (an aggregation stays on the data nodes); any other table reference becomes a scan of the
columns the statement names, with the time intervals and typed filters of its block's WHERE.
What no native query expresses (joins, windows, VALUES, set operations, expressions over
results) then runs in DuckDB inside the broker over the stages' rows, with Druid's functions
translated (`strata.sql.functions`). Scans are bounded by `maxSubqueryRows`, as Druid bounds the
rows a subquery may hand the broker (`strata.sql.subquery_limits`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import pyarrow as pa
from sqlglot import exp
from sqlglot.errors import OptimizeError, SqlglotError
from sqlglot.optimizer.qualify import qualify
from sqlglot.optimizer.scope import Scope, traverse_scope

from strata.query.errors import QueryError, invalid
from strata.sql.column_types import relational_type
from strata.sql.composed import ComposedPlan, Stage, aliased_table, stage_name
from strata.sql.dialect import DIALECT
from strata.sql.filters import TIME, conjuncts, now_millis, split_time, to_filter
from strata.sql.plan import Output, SqlPlan
from strata.sql.sql_types import star_name, unnamed_column
from strata.sql.subquery_limits import max_subquery_rows
from strata.sql.typing_rules import sql_type

ETERNITY = "-146136543-09-08T08:23:32.096Z/146140482-04-24T15:36:27.903Z"
SYSTEM_SCHEMAS = {"information_schema": "INFORMATION_SCHEMA", "sys": "sys", "lookup": "lookup"}


class TableCatalog(Protocol):
    def columns(self, table: str) -> Mapping[str, str] | None: ...


PlanSelect = Callable[[exp.Select, str, Mapping[str, str]], SqlPlan]


@dataclass
class Relational:
    """What planning relationally needs from the statement planner."""

    catalog: TableCatalog
    system: Callable[[], dict[str, pa.Table]]  # INFORMATION_SCHEMA and sys tables, by `schema__table`
    plan_select: PlanSelect  # the native planner for one block over one datasource
    context: Mapping[str, Any]


def output_names(tree: exp.Expr) -> None:
    """Name every unnamed select item as Druid does (`EXPR$n`), in every SELECT,
    so the names survive qualification and the outer query can refer to them."""
    for select in tree.find_all(exp.Select):
        for i, item in enumerate(list(select.expressions)):
            if isinstance(item, (exp.Alias, exp.Column, exp.Star)):
                continue
            if isinstance(item, exp.Dot) or item.find(exp.Star) is item:
                continue
            item.replace(exp.alias_(item.copy(), unnamed_column(select.expressions, i), quoted=True))


def plan_relational(tree: exp.Query, env: Relational) -> ComposedPlan:
    tree = tree.copy()
    output_names(tree)
    starred = any(item.find(exp.Star) for item in tree.selects)  # before qualify expands the stars
    schema, system = _schema(tree, env)
    try:
        qualified = qualify(
            tree,
            schema=schema,
            db="druid",
            dialect=DIALECT,
            quote_identifiers=True,
            identify=True,
            validate_qualify_columns=True,
        )
    except OptimizeError as e:
        unknown = _UNRESOLVED.match(str(e))
        if unknown:  # Druid's validator's words
            raise invalid("Column '%s' not found in any table", unknown.group(1)) from None
        raise invalid("%s", _plain(str(e))) from None
    except SqlglotError as e:
        raise invalid("SQL is not valid: %s", _plain(str(e))) from None
    assert isinstance(qualified, exp.Query)
    names = [item.alias_or_name for item in qualified.selects]
    if starred:
        names = _uniquified(names)
    stages: list[Stage] = []
    tables: dict[str, pa.Table] = {}
    for scope in traverse_scope(qualified):
        if scope.is_root:
            continue
        stage = _native_block(scope, env)
        if stage is not None:
            stages.append(stage)
            scope.expression.replace(exp.select("*").from_(aliased_table(stage.name, None)))
    used = _column_names(qualified)
    for scope in traverse_scope(qualified):
        for alias, source in scope.selected_sources.items():
            node, origin = source
            if not isinstance(node, exp.Table) or not isinstance(origin, exp.Table) or node.parent is None:
                continue  # a CTE, a subquery or VALUES: planned as its own scope
            schema_name = (node.db or "druid").lower()
            if schema_name in SYSTEM_SCHEMAS:
                key = f"{schema_name}__{node.name.lower()}"
                if key not in system:
                    raise invalid("Object '%s.%s' not found", node.db, node.name)
                tables[key] = system[key]
                node.replace(aliased_table(key, alias))
                continue
            if node.name.startswith("__stage"):
                continue
            columns = env.catalog.columns(node.name)
            if columns is None:
                raise invalid("Object '%s' not found", node.name)
            stage = _scan_stage(scope, node, columns, used, env.context)
            stages.append(stage)
            node.replace(aliased_table(stage.name, alias))
    return ComposedPlan(stages, qualified, names=names, tables=tables)


def _uniquified(names: list[str]) -> list[str]:
    """Names a `*` expanded, made unique as Calcite makes them (`star_name`)."""
    used: set[str] = set()
    return [star_name(name, used) for name in names]


def _schema(tree: exp.Expr, env: Relational) -> tuple[dict[str, Any], dict[str, pa.Table]]:
    druid: dict[str, dict[str, str]] = {}
    system: dict[str, pa.Table] = {}
    schema: dict[str, Any] = {}
    for table in tree.find_all(exp.Table):
        db = (table.db or "druid").lower()
        if db in SYSTEM_SCHEMAS:
            if not system:
                system = env.system()
            key = f"{db}__{table.name.lower()}"
            if key in system:
                schema.setdefault(table.db, {})[table.name] = {
                    name: sql_type(system[key].schema.field(name).type) for name in system[key].column_names
                }
            continue
        if db != "druid":
            raise invalid("Object '%s.%s' not found", table.db, table.name)
        columns = env.catalog.columns(table.name)
        if columns is not None:
            druid = schema.setdefault("druid", druid)
            druid[table.name] = {
                name: "TIMESTAMP" if name == TIME else relational_type(kind) for name, kind in columns.items()
            }
    return schema, system


def _column_names(tree: exp.Expr) -> set[str]:
    return {c.name for c in tree.find_all(exp.Column)}


def _native_block(scope: Scope, env: Relational) -> Stage | None:
    """A subquery or CTE over one datasource as one native query, when the native planner takes it."""
    select = scope.expression
    if not isinstance(select, exp.Select) or select.args.get("joins") or scope.subquery_scopes:
        return None
    if scope.derived_table_scopes or scope.set_operation_scopes or select.find(exp.Window):
        return None
    sources = list(scope.selected_sources.values())
    table = sources[0][1] if len(sources) == 1 else None
    if not isinstance(table, exp.Table):
        return None
    if (table.db or "druid").lower() != "druid":
        return None
    columns = env.catalog.columns(table.name)
    if columns is None:
        return None
    plain = _unqualified(select)
    try:
        plan = env.plan_select(plain, table.name, columns)
    except QueryError:
        return None
    if plan.native is None:
        return None
    plan.raw_times = True
    plan.row_bound = max_subquery_rows(env.context)
    return Stage(stage_name(), plan)


def _unqualified(select: exp.Select) -> exp.Select:
    """A copy of a one-table block in the shape the native planner reads: bare column names."""
    plain = select.copy()
    for column in plain.find_all(exp.Column):
        column.set("table", None)
        column.set("db", None)
    source = plain.args["from_"].this
    plain.set("from_", exp.From(this=exp.to_table(source.name)))
    return plain


def _scan_stage(
    scope: Scope, table: exp.Table, columns: Mapping[str, str], used: set[str], context: Mapping[str, Any]
) -> Stage:
    names = [c for c in columns if c in used] or [TIME]
    if TIME not in names:
        names.insert(0, TIME)
    native: dict[str, Any] = {
        "queryType": "scan",
        "dataSource": table.name,
        "intervals": [ETERNITY],
        "columns": names,
        "resultFormat": "compactedList",
        "limit": max_subquery_rows(context) + 1,
        "context": {k: v for k, v in context.items() if k not in ("sqlTimeZone",)},
    }
    own = _own_conjuncts(scope, table)
    if own:
        _push_where(own, native, columns)
    outputs = [Output(n, n, columns.get(n, "LONG")) for n in names]
    plan = SqlPlan(outputs, native, raw_times=True, row_bound=max_subquery_rows(context))
    return Stage(stage_name(), plan)


def _own_conjuncts(scope: Scope, table: exp.Table) -> list[exp.Expr]:
    """The terms of the block's WHERE that read only `table` and may filter it before any join:
    it is the FROM table or an inner-joined one, and no RIGHT or FULL join can bring its rows back
    as nulls. The whole WHERE still runs in DuckDB, so a term pushed down only narrows the scan."""
    select = scope.expression
    if not isinstance(select, exp.Select) or select.args.get("where") is None:
        return []
    joins = select.args.get("joins") or []
    if any(join.side in ("RIGHT", "FULL") for join in joins):
        return []
    alias = table.alias_or_name
    from_ = select.args["from_"].this
    is_from = isinstance(from_, exp.Table) and from_.alias_or_name == alias
    inner = any(isinstance(j.this, exp.Table) and j.this.alias_or_name == alias and not j.side for j in joins)
    if not is_from and not inner:
        return []
    out = []
    for term in conjuncts(select.args["where"].this):
        columns = list(term.find_all(exp.Column))
        if not columns or term.find(exp.Subquery, exp.Select) is not None:
            continue
        if all(c.table == alias for c in columns):
            out.append(term)
    return out


def _push_where(terms: list[exp.Expr], native: dict[str, Any], columns: Mapping[str, str]) -> None:
    """Conditions on __time as the scan's intervals, plain ones as typed filters."""
    now = now_millis()
    times: list[exp.Expr] = []
    filters: list[dict[str, Any]] = []
    for term in terms:
        plain = term.copy()
        for column in plain.find_all(exp.Column):
            column.set("table", None)
        try:
            _, rest = split_time(plain, now)
        except QueryError:
            continue
        if rest is None:
            times.append(plain)
            continue
        try:
            filters.append(to_filter(plain, dict(columns), now))
        except QueryError:
            continue
    if times:
        native["intervals"], _ = split_time(exp.and_(*times), now)
    if filters:
        native["filter"] = filters[0] if len(filters) == 1 else {"type": "and", "fields": filters}


_UNRESOLVED = re.compile(r"Column '([^']*)' could not be resolved")


def _plain(message: str) -> str:
    return " ".join(message.split())
