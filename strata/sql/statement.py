"""One SQL statement: a SELECT over a datasource (planned to native), over INFORMATION_SCHEMA or
sys (answered from the broker's catalog with DuckDB), or with no FROM at all (`SELECT 1`)."""

from __future__ import annotations

import contextlib
import datetime
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any
from zoneinfo import ZoneInfo

from sqlglot import exp

from strata.query.errors import QueryError, QueryUnsupported, ResourceLimitExceeded, TypeMismatch, invalid
from strata.sql.aggregate_split import split_aggregate
from strata.sql.composed import ComposedPlan, Plan, Stage, aliased_table, stage_name
from strata.sql.functions import check_supported, druid_name
from strata.sql.implicit_casts import implicit_casts
from strata.sql.literals import check_literals
from strata.sql.nullability import fold_having_null_tests
from strata.sql.operand_checks import check_operand_types
from strata.sql.plan import SqlPlan
from strata.sql.planner import Parsed, parse_statement, plan_select
from strata.sql.relational import Relational, plan_relational
from strata.sql.session import current_zone, parse_time_zone, time_zone
from strata.sql.sql_types import BOOLEAN, star_name
from strata.sql.subqueries import plan_composed, prune_union_subqueries
from strata.sql.subquery_limits import max_subquery_rows
from strata.sql.system_tables import Catalog, system_tables
from strata.sql.unnest import boolean_elements, plan_unnest, unnest_joins
from strata.sql.unplannable import refuse_unplannable_shapes

SYSTEM_SCHEMAS = {"information_schema": "INFORMATION_SCHEMA", "sys": "sys"}


@dataclass
class PlannedStatement:
    plan: Plan
    explain: bool
    context: Mapping[str, Any] = field(default_factory=dict)  # the request's, with SET statements applied

    @property
    def names(self) -> list[str]:
        return [o.name for o in self.plan.outputs]

    @property
    def types(self) -> list[str]:
        return [o.druid_type for o in self.plan.outputs]

    @property
    def sql_types(self) -> list[str]:
        return [o.sql_type for o in self.plan.outputs]


def referenced_tables(sql: str) -> list[str]:
    """Datasources a statement reads (their columns must be in the catalog before planning)."""
    try:
        return tables_read(parse_statement(sql))
    except QueryError:
        return []  # planning reports the error


def tables_read(parsed: Parsed) -> list[str]:
    return [t.name for t in parsed.tree.find_all(exp.Table) if (t.db or "druid").lower() == "druid"]


def plan_parsed(
    sql: str, catalog: Catalog, context: Mapping[str, Any]
) -> tuple[PlannedStatement | QueryError | None, list[str]]:
    """The statement's plan and the datasources it reads, from one parse; no plan when one of those
    datasources has no columns in `catalog` yet (the caller reads them and plans again). A statement
    that does not plan gives its error beside those datasources: the caller still refreshes their
    columns, which may be what it lacked (a column a REPLACE has just added)."""
    with _user_input():
        refuse_ingest(sql)
        parsed = parse_statement(sql)
        tables = tables_read(parsed)
    if any(t in catalog.tables() and catalog.columns(t) is None for t in tables):
        return None, tables
    try:
        return plan_statement(sql, catalog, context, parsed=parsed), tables
    except QueryError as e:
        return e, tables


def plan_statement(
    sql: str, catalog: Catalog, context: Mapping[str, Any], *, parsed: Parsed | None = None
) -> PlannedStatement:
    with _user_input():
        if parsed is None:
            refuse_ingest(sql)
        return _plan_statement(parsed or parse_statement(sql), catalog, context)


def refuse_ingest(sql: str) -> None:
    """INSERT and REPLACE run as tasks (`/druid/v2/sql/task`), as Druid's native SQL engine says."""
    from strata.sql.ingest.clauses import ingest_operation

    operation = ingest_operation(sql)
    if operation == "REPLACE":
        raise invalid(
            "REPLACE operations are not supported by the requested SQL engine [native].  Consider using MSQ."
        )
    if operation is not None:
        raise invalid(
            "%s operations are not supported by requested SQL engine [native], consider using MSQ.", operation
        )


@contextlib.contextmanager
def _user_input() -> Iterator[None]:
    """A statement shaped unlike anything planned for is the user's input, never a server error."""
    try:
        yield
    except (ValueError, TypeError, KeyError, AttributeError, IndexError) as e:
        raise invalid("Cannot plan the SQL statement: %s: %s", type(e).__name__, e) from None


def _plan_statement(parsed: Parsed, catalog: Catalog, context: Mapping[str, Any]) -> PlannedStatement:
    context = {**context, **parsed.settings}
    _refuse_unplannable(parsed.tree)
    check_literals(parsed.tree)
    check_operand_types(parsed.tree, catalog.columns)
    refuse_unplannable_shapes(parsed.tree, catalog.columns)
    tree = fold_having_null_tests(implicit_casts(_ungrouped_joins(parsed.tree), catalog.columns))
    tree = _outer_limit(tree, context.get("sqlOuterLimit"))
    for hint in list(tree.find_all(exp.Hint)):  # join hints choose Druid's join algorithm, not answers
        hint.pop()
    zone = parse_time_zone(context.get("sqlTimeZone"))
    tree = prune_union_subqueries(_fix_now(tree, context.get("sqlCurrentTimestamp"), zone))
    with time_zone(zone):
        plan = _plan_tree(tree, catalog, context)
    _refuse_unknown_functions(plan)
    return PlannedStatement(plan, parsed.explain, context)


def _ungrouped_joins(tree: exp.Expr) -> exp.Expr:
    """`FROM (a CROSS JOIN UNNEST(..) AS u(c)) CROSS JOIN b` as `FROM a CROSS JOIN UNNEST(..) AS
    u(c) CROSS JOIN b`: joins associate to the left, so parentheses around the first operand and
    its joins change nothing, and the planners read the joins of one FROM."""
    if not any(_grouped_joins(s) for s in tree.find_all(exp.Select)):
        return tree
    tree = tree.copy()
    for select in tree.find_all(exp.Select):
        source = _grouped_joins(select)
        if source is not None:
            table = source.this
            joins = table.args["joins"]
            table.set("joins", None)
            select.set("from_", exp.From(this=table))
            select.set("joins", [*joins, *(select.args.get("joins") or [])])
    return tree


def _grouped_joins(select: exp.Select) -> exp.Subquery | None:
    """The unaliased `(table JOIN ...)` a SELECT reads first, if it reads one."""
    source = (select.args.get("from_") or exp.From()).this
    if isinstance(source, exp.Subquery) and not source.alias and isinstance(source.this, exp.Table):
        return source if source.this.args.get("joins") else None
    return None


def _refuse_unplannable(tree: exp.Expr) -> None:
    """Shapes Druid does not plan, refused before any work: a recursive query (DuckDB would run
    one until its memory or time ran out) and table functions (`FROM read_csv(...)`, `range(...)`):
    FROM reads datasources, system tables, subqueries, VALUES and UNNEST."""
    if any(with_.args.get("recursive") for with_ in tree.find_all(exp.With)):
        raise invalid("Recursive queries (WITH RECURSIVE) are not supported")
    for table in tree.find_all(exp.Table):
        if isinstance(table.this, exp.Func):
            name = druid_name(table.this) or "?"
            raise QueryUnsupported(f"Table function [{name}] is not supported")


def _refuse_unknown_functions(plan: Plan) -> None:
    """What the broker's engine will run, checked against the function registry now, before any
    native stage runs (a 501 naming the first function Druid does not have)."""
    if isinstance(plan, SqlPlan):
        return
    if isinstance(plan, ComposedPlan):
        check_supported(plan.outer)
    for stage in plan.stages:
        _refuse_unknown_functions(stage.plan)


def _fix_now(tree: exp.Expr, current: Any, zone: str | None) -> exp.Expr:
    """CURRENT_TIMESTAMP and CURRENT_DATE as the literals of one instant (`sqlCurrentTimestamp`,
    else now), as Druid's planner reduces them: every use in a statement sees the same time."""
    if tree.find(exp.CurrentTimestamp, exp.CurrentDate) is None:
        return tree
    if current is None:
        instant = datetime.datetime.now(datetime.UTC)
    else:
        try:
            instant = datetime.datetime.fromisoformat(str(current).replace("Z", "+00:00"))
        except ValueError:
            raise invalid(
                "Context parameter [sqlCurrentTimestamp] is not a timestamp: [%s]", current
            ) from None
        if instant.tzinfo is None:
            instant = instant.replace(tzinfo=datetime.UTC)
    local = instant.astimezone(ZoneInfo(zone) if zone else datetime.UTC)
    stamp = local.strftime("%Y-%m-%d %H:%M:%S.%f")[:23]

    def swap(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.CurrentTimestamp):
            return exp.cast(exp.Literal.string(stamp), exp.DType.TIMESTAMP)
        if isinstance(node, exp.CurrentDate):
            return exp.cast(exp.Literal.string(stamp[:10]), exp.DType.DATE)
        return node

    return tree.transform(swap)


def _outer_limit(tree: exp.Expr, value: Any) -> exp.Expr:
    """Druid's `sqlOuterLimit`: at most that many rows, after the statement's own ORDER BY and LIMIT."""
    if value is None or not isinstance(tree, exp.Query):
        return tree
    try:
        outer = int(value)
    except (TypeError, ValueError):
        raise invalid("Context parameter [sqlOuterLimit] must be a number, got [%s]", value) from None
    if outer < 0:
        raise invalid("Context parameter [sqlOuterLimit] must not be negative, got [%s]", value)
    limit = tree.args.get("limit")
    own = limit.expression if isinstance(limit, exp.Limit) else None
    if isinstance(own, exp.Literal) and not own.is_string and own.this.isdigit():
        outer = min(outer, int(own.this))
    elif own is not None:
        return exp.select("*").from_(tree.subquery("__outer")).limit(outer)
    return tree.limit(outer)


def _plan_tree(tree: exp.Expr, catalog: Catalog, context: Mapping[str, Any]) -> Plan:
    """The native plan when the statement's shape is one the native planner takes, else the
    relational plan (`strata.sql.relational`): native stages and DuckDB on the broker."""
    if isinstance(tree, (exp.Insert, exp.Update, exp.Delete, exp.Create, exp.Drop, exp.Merge)):
        raise QueryUnsupported(f"Statement [{type(tree).__name__.upper()}] is not supported; only SELECT")
    if isinstance(tree, exp.Subquery):
        tree = tree.unnest()
    if not isinstance(tree, exp.Query):
        raise invalid(
            "SQL parse failed: expected a SELECT statement, got [%s]", tree.sql(dialect="druid")[:200]
        )
    try:
        return _plan_native(tree, catalog, context)
    except (ResourceLimitExceeded, TypeMismatch):
        raise
    except QueryError:
        pass
    split = _split_aggregate(tree, catalog, context) if isinstance(tree, exp.Select) else None
    if split is not None:
        return split
    env = Relational(
        catalog,
        lambda: system_tables(catalog),
        lambda select, table, columns: plan_select(select, table, columns, context),
        context,
    )
    plan = plan_relational(tree, env)
    plan.time_zone = current_zone()
    return plan


def _split_aggregate(tree: exp.Select, catalog: Catalog, context: Mapping[str, Any]) -> ComposedPlan | None:
    """The grouping of a one-table aggregation as a native query and the rest (windows, what the
    native layer cannot compute) on the broker (`strata.sql.aggregate_split`); None when that
    grouping is no native query either."""
    source = tree.args.get("from_")
    table = None if source is None else source.this
    if not isinstance(table, exp.Table) or (table.db or "druid").lower() != "druid":
        return None
    name = stage_name()
    parts = split_aggregate(tree, aliased_table(name, table.alias_or_name))
    if parts is None:
        return None
    inner, outer = parts
    try:
        inner_plan = _plan_native(inner, catalog, context)
    except QueryError:
        return None
    if not isinstance(inner_plan, SqlPlan):
        return None
    inner_plan.raw_times = True
    inner_plan.row_bound = max_subquery_rows(context)  # Druid bounds what a subquery hands the broker
    names = [item.alias_or_name for item in outer.expressions]
    return ComposedPlan([Stage(name, inner_plan)], outer, names=names, time_zone=current_zone())


def _plan_native(tree: exp.Query, catalog: Catalog, context: Mapping[str, Any]) -> Plan:
    composed = plan_composed(tree, context, lambda inner: _plan_tree(inner, catalog, context))
    if isinstance(composed, ComposedPlan):
        stages = {stage.name for stage in composed.stages}
        if any(t.name not in stages for t in composed.outer.find_all(exp.Table)):
            raise QueryUnsupported("the outer query reads a table itself: planned relationally")
        composed.time_zone = current_zone()
    if composed is not None:
        return composed
    if not isinstance(tree, exp.Select):
        raise QueryUnsupported("not one SELECT: planned relationally")
    source = tree.args.get("from_") or tree.args.get("from")
    unnests = unnest_joins(tree)
    if (tree.args.get("joins") and unnests is None) or source is None:
        raise QueryUnsupported("a join or no table: planned relationally")
    tree = _single_table(tree)
    table = source.this
    if isinstance(table, exp.Subquery):
        _check_columns(table.this, catalog)
        tree = _flatten(tree, table)
        table = tree.args["from_"].this
        unnests = unnest_joins(tree)  # reading the subquery's columns by their table names
    if not isinstance(table, exp.Table):
        raise QueryUnsupported(f"FROM [{table.sql(dialect='druid')}]: planned relationally")
    schema = (table.db or "druid").lower()
    if schema != "druid":
        raise QueryUnsupported("a system table: planned relationally")
    columns = catalog.columns(table.name)
    if columns is None:
        raise invalid("Object '%s' not found", table.name)
    if unnests:  # over an unnest dataSource, as Druid plans CROSS JOIN UNNEST
        tree, data_source, columns = plan_unnest(tree, unnests, table.name, columns)
        plan = plan_select(tree, table.name, columns, context)
        assert plan.native is not None
        plan.native["dataSource"] = data_source
        booleans = boolean_elements(unnests)
        for output in plan.outputs:
            if output.source in booleans and output.sql_type_name is None:
                output.sql_type_name = BOOLEAN  # a BOOLEAN ARRAY's elements print true/false
        return plan
    return plan_select(tree, table.name, columns, context)


def _check_columns(inner: exp.Expr, catalog: Catalog) -> None:
    """A plain subquery reads only its own table's columns (flattened into the outer SELECT, an
    unknown name there could resolve to an outer one, an UNNEST alias say)."""
    source = inner.args.get("from_") if isinstance(inner, exp.Select) else None
    table = None if source is None else source.this
    if not isinstance(table, exp.Table) or (table.db or "druid").lower() != "druid":
        return
    known = catalog.columns(table.name)
    if known is None:
        return
    aliases = {e.alias for e in inner.expressions if isinstance(e, exp.Alias)}
    for column in inner.find_all(exp.Column):
        if column.name not in known and column.name not in aliases and column.name != "__time":
            raise invalid("Column '%s' not found in any table", column.name)


def _single_table(tree: exp.Select) -> exp.Select:
    """A one-table SELECT in the native planner's terms: `t.col` as `col` where `t` names the
    table, and `GROUP BY ()` as no grouping (one row of aggregates)."""
    table = tree.args["from_"].this
    names = {table.alias_or_name, table.name} if isinstance(table, exp.Table) else set()
    out = tree.copy()
    for column in out.find_all(exp.Column):
        if column.table and column.table in names and not column.args.get("db"):
            scope_select = column.find_ancestor(exp.Select)
            if scope_select is out:
                column.set("table", None)
    group = out.args.get("group")
    if group is not None and all(isinstance(e, exp.Tuple) and not e.expressions for e in group.expressions):
        if out.find(exp.AggFunc) is None:
            raise QueryUnsupported("GROUP BY () without aggregates: planned relationally")
        out.set("group", None)
    return out


def _star_as_items(items: list[exp.Expr], inner: list[exp.Expr]) -> list[exp.Expr]:
    """The outer select list with its `*` listing the subquery's items (not its table's columns),
    each named as Calcite's expansion of `*` names it (`star_name`)."""
    out: list[exp.Expr] = []
    used: set[str] = set()
    for item in items:
        if not _is_star(item):
            used.add(item.alias_or_name)
            out.append(item)
            continue
        for listed in inner:
            if isinstance(listed, exp.Star):
                out.append(listed.copy())
                continue
            name = star_name(listed.alias_or_name, used)
            value = listed.this if isinstance(listed, exp.Alias) else listed
            renamed = isinstance(listed, exp.Alias) or name != listed.alias_or_name
            out.append(exp.alias_(value.copy(), name, quoted=True) if renamed else value.copy())
    return out


def _is_star(item: exp.Expr) -> bool:
    return isinstance(item, exp.Star) or (isinstance(item, exp.Column) and isinstance(item.this, exp.Star))


def _flatten(outer: exp.Select, sub: exp.Subquery) -> exp.Select:
    """`SELECT ... FROM (SELECT a, b AS c FROM t WHERE p) AS v WHERE q` as one SELECT over t
    (Superset wraps virtual datasets that way); only when the inner query just filters and renames."""
    inner = sub.this
    source = inner.args.get("from_") if isinstance(inner, exp.Select) else None
    if source is None or not isinstance(source.this, exp.Table):
        raise QueryUnsupported("FROM a subquery over no table: planned relationally")
    plain = isinstance(inner, exp.Select) and not any(
        inner.args.get(k) for k in ("group", "having", "order", "limit", "offset", "distinct", "joins")
    )
    if not plain or inner.find(exp.AggFunc) is not None:
        raise QueryUnsupported("FROM a subquery is supported only over a plain selection of one table")
    renames: dict[str, exp.Expr] = {}
    for e in inner.expressions:
        if isinstance(e, exp.Alias):
            renames[e.alias] = e.this
        elif not isinstance(e, (exp.Column, exp.Star)):
            raise QueryUnsupported("FROM a subquery is supported only over plain columns")
    flat = outer.copy()
    for column in list(flat.find_all(exp.Column)):
        column.set("table", None)
        if column.name in renames:
            column.replace(renames[column.name].copy())
    flat.set("expressions", _star_as_items(flat.expressions, inner.expressions))
    flat.set("from_", inner.args.get("from_") or inner.args.get("from"))
    inner_where = inner.args.get("where")
    if inner_where is not None:
        outer_where = flat.args.get("where")
        condition = inner_where.this if outer_where is None else exp.and_(inner_where.this, outer_where.this)
        flat.set("where", exp.Where(this=condition))
    return flat
