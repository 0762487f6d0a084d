"""Statements Druid's native SQL planner finds no plan for, refused as Druid refuses them.

Strata's relational planner (DuckDB on the broker) could answer these, but a statement must get
Druid's answer, and Druid's is an error:

- A scan ordered by anything but `__time` alone, over a concrete datasource (a table, unnested or
  not). Druid sorts a scan's rows by another column only when it reads a datasource that is not
  concrete (a subquery that is a query of its own, VALUES, a join), by a sort stacked on the scan
  (`DruidQuery.toScanAndSortQuery`); over a table it gives up with "SQL query requires ordering a
  table by non-time column". An ORDER BY without LIMIT or OFFSET in a subquery is dropped by
  Calcite before that, and a plain subquery (projections and filters) is merged into the scan.
- `x IN (subquery)` or `x NOT IN (subquery)` whose `x` is an UNNEST's column: the join it becomes
  would have to sit above the unnest, where no rule of Druid's planner takes it ("Unhandled Query
  Planning Failure"); on a column of the table, the join goes below the unnest and plans.
- An aggregation over a UNION ALL subquery one of whose branches reads an UNNEST: the union would
  have to be a union datasource, which Druid builds only of table queries
  (`DruidUnionDataSourceRule`), an unnest is not one ("Unhandled Query Planning Failure"); a
  projection or filter over such a union goes into its branches and plans.
- `ARRAY_AGG(expr, size)` and `STRING_AGG(expr, separator[, size])` in a SELECT without FROM:
  Calcite folds the SELECT's literals into the one row it reads, so the size or separator reaches
  the aggregator as a column, and Druid's takes only a literal there ("Aggregation
  [ARRAY_AGG($0, $1)] is not supported"; `ArraySqlAggregator`, `StringSqlAggregator`).
- `ARRAY[]`: Calcite's ARRAY constructor takes at least one element ("Require at least 1
  argument"), and elements of a common type: `ARRAY[TRUE, 1]` has none ("Parameters must be of
  the same type").
- An UNNEST whose argument names, unqualified, the column its own alias names
  (`unnest(a_int) AS u(a_int)`): Calcite's validator finds the name twice ("Column 'a_int' is
  ambiguous").

Pure: reads the parsed statement and which tables the catalog has.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from sqlglot import exp

from strata.query.errors import PlanningFailed, UnhandledPlanningFailure, invalid
from strata.sql.filters import TIME
from strata.sql.unnest import unnest_joins

Columns = Callable[[str], Mapping[str, str] | None]
Ctes = Mapping[str, exp.Expr]


def refuse_unplannable_shapes(tree: exp.Expr, columns: Columns) -> None:
    """Raise Druid's planning error when the statement has one of the shapes above."""
    root = tree.unnest() if isinstance(tree, exp.Subquery) else tree
    ctes = {cte.alias: cte.this for cte in root.find_all(exp.CTE)}
    for select in root.find_all(exp.Select):
        if select.args.get("order") is not None and (select is root or _keeps_order(select)):
            _check_scan_order(select, ctes, columns)
        if _aggregates(select) and _unnesting_union(select, ctes):
            raise UnhandledPlanningFailure()
        _check_literal_arguments(select)
        _check_unnest_arguments(select)
    for node in root.find_all(exp.In):
        if node.args.get("query") is not None and _on_unnested(node, ctes):
            raise UnhandledPlanningFailure()
    for array in root.find_all(exp.Array):  # Calcite's checks of the ARRAY constructor
        if not array.expressions:
            raise invalid("Require at least 1 argument")
        if _booleans_with_others(array.expressions):
            raise invalid("Parameters must be of the same type")


def _aggregates(select: exp.Select) -> bool:
    if any(select.args.get(k) for k in ("group", "having", "distinct")):
        return True
    return any(node.find_ancestor(exp.Select) is select for node in select.find_all(exp.AggFunc))


def _unnesting_union(select: exp.Select, ctes: Ctes) -> bool:
    """Whether the SELECT reads a UNION ALL subquery with a branch that reads an UNNEST."""
    source = _source(select)
    if isinstance(source, exp.Table) and not source.db:
        source = ctes.get(source.name)
    query = source.unnest() if isinstance(source, exp.Subquery) else source
    if not isinstance(query, exp.Union) or query.args.get("distinct"):
        return False
    return any(isinstance(leaf, exp.Select) and unnest_joins(leaf) for leaf in _leaves(query))


def _leaves(node: exp.Expr) -> list[exp.Expr]:
    node = node.unnest() if isinstance(node, exp.Subquery) else node
    if isinstance(node, exp.Union):
        return _leaves(node.this) + _leaves(node.expression)
    return [node]


def _check_literal_arguments(select: exp.Select) -> None:
    if select.args.get("from_") is not None:
        return
    for node in select.find_all(exp.ArrayAgg, exp.GroupConcat):
        if node.find_ancestor(exp.Select) is not select:
            continue
        if isinstance(node, exp.GroupConcat):
            call, more = "STRING_AGG", 2 if node.args.get("on_overflow") is not None else 1
        elif node.meta.get("size") is not None:
            call, more = "ARRAY_AGG", 1
        else:
            continue
        distinct = "DISTINCT " if isinstance(node.this, exp.Distinct) else ""
        arguments = ", ".join(f"${i}" for i in range(more + 1))
        raise PlanningFailed.because(f"Aggregation [{call}({distinct}{arguments})] is not supported")


def _booleans_with_others(elements: list[exp.Expr]) -> bool:
    """Literal elements with no common type: a BOOLEAN beside a number or a string."""
    literals = [e for e in elements if isinstance(e, (exp.Boolean, exp.Literal))]
    return any(isinstance(e, exp.Boolean) for e in literals) and any(
        isinstance(e, exp.Literal) for e in literals
    )


def _check_unnest_arguments(select: exp.Select) -> None:
    """An UNNEST's argument naming, unqualified, a column its own alias names too
    (`unnest(a_int) AS u(a_int)`): Calcite resolves the argument in the FROM so far and the
    alias, finds both, and refuses ("Column 'a_int' is ambiguous")."""
    for join in select.args.get("joins") or []:
        unnest = join.this
        alias = unnest.args.get("alias") if isinstance(unnest, exp.Unnest) else None
        names = {c.name for c in alias.columns} if isinstance(alias, exp.TableAlias) else set()
        for argument in unnest.expressions if names else []:
            for column in argument.find_all(exp.Column):
                if not column.table and column.name in names:
                    raise invalid("Column '%s' is ambiguous", column.name)


def _keeps_order(select: exp.Select) -> bool:
    """A subquery's ORDER BY survives Calcite only beside a LIMIT or an OFFSET."""
    return select.args.get("limit") is not None or select.args.get("offset") is not None


def _check_scan_order(select: exp.Select, ctes: Ctes, columns: Columns) -> None:
    if _empty_limit(select) or not _table_scan(select, ctes, columns):
        return
    keys = [_resolved(o.this, select) for o in select.args["order"].expressions]
    if any(key is None for key in keys):
        return  # an ordinal into `*`: not worth guessing
    named = [key for key in keys if key is not None and key.find(exp.Column) is not None]  # constants drop
    if not named or (len(set(named)) == 1 and _is_time(named[0], select, ctes)):
        return
    shown = ", ".join(key.name if isinstance(key, exp.Column) else key.sql(dialect="druid") for key in named)
    raise PlanningFailed.because(
        f"SQL query requires ordering a table by non-time column [[{shown}]], which is not supported."
    )


def _empty_limit(select: exp.Select) -> bool:
    """LIMIT 0: Calcite prunes the statement to no rows before Druid plans a scan."""
    limit = select.args.get("limit")
    value = limit.expression if isinstance(limit, exp.Limit) else None
    return isinstance(value, exp.Literal) and not value.is_string and value.this == "0"


def _table_scan(select: exp.Select, ctes: Ctes, columns: Columns) -> bool:
    """Whether the SELECT is one native scan of a concrete datasource: no grouping, aggregate,
    DISTINCT, window or subquery of its own (a subquery in a condition becomes a join), over a
    table, unnested or not, or over a subquery Calcite merges into that scan."""
    if _aggregates(select):
        return False
    for node in select.find_all(exp.Window, exp.Subquery, exp.Exists):
        if node.find_ancestor(exp.Select) is select and node is not _source(select):
            return False
    if select.args.get("joins") and (unnest_joins(select) is None or _unnests_a_query(select, ctes)):
        return False  # a join, or an unnest of what is more than the table: not concrete either
    source = _source(select)
    if isinstance(source, exp.Table):
        if isinstance(source.this, exp.Func) or (source.db or "druid").lower() != "druid":
            return False
        if not source.db and source.name in ctes:
            return _merged(ctes[source.name], ctes, columns)
        return columns(source.name) is not None
    return isinstance(source, exp.Subquery) and _merged(source.this, ctes, columns)


def _merged(query: exp.Expr, ctes: Ctes, columns: Columns) -> bool:
    """A subquery Calcite merges into the scan over it: a plain selection without LIMIT or OFFSET
    (an ORDER BY of its own is dropped)."""
    return isinstance(query, exp.Select) and not _keeps_order(query) and _table_scan(query, ctes, columns)


def _source(select: exp.Select) -> exp.Expr | None:
    source = select.args.get("from_")
    return None if source is None else source.this


def _inner_query(select: exp.Select, ctes: Ctes) -> exp.Select | None:
    """The SELECT a SELECT reads from: its FROM subquery or common table expression."""
    source = _source(select)
    if isinstance(source, exp.Subquery):
        inner = source.this
    elif isinstance(source, exp.Table) and not source.db and source.name in ctes:
        inner = ctes[source.name]
    else:
        return None
    return inner if isinstance(inner, exp.Select) else None


def _unnests_a_query(select: exp.Select, ctes: Ctes) -> bool:
    """Whether the unnest reads more than the table: a filter of the table's own columns goes
    under the unnest (a filtered datasource), a subquery that computes columns stays one (a query
    datasource); neither is concrete (`DruidCorrelateUnnestRel`)."""
    inner = _inner_query(select, ctes)
    if inner is not None and (
        inner.args.get("where") is not None
        or not all(isinstance(item, (exp.Star, exp.Column)) for item in inner.expressions)
    ):
        return True
    where = select.args.get("where")
    if where is None:
        return False
    unnested = {name for join in unnest_joins(select) or [] for name in _unnest_names(join)}
    return any(column.name not in unnested for column in where.find_all(exp.Column))


def _resolved(key: exp.Expr, select: exp.Select) -> exp.Expr | None:
    """An ORDER BY key as the expression it sorts by: an ordinal or an output name is the SELECT's
    item; None for an ordinal into `*`."""
    items: list[exp.Expr] = select.expressions
    if isinstance(key, exp.Literal) and not key.is_string:
        index = int(key.this) - 1
        if any(isinstance(item, exp.Star) for item in items[: index + 1]) or not 0 <= index < len(items):
            return None
        return items[index].unalias()
    if isinstance(key, exp.Column) and not key.table:
        for item in items:
            if isinstance(item, exp.Alias) and item.alias == key.name:
                return item.unalias()
    return key


def _is_time(node: exp.Expr, select: exp.Select, ctes: Ctes) -> bool:
    """Whether `node` is the table's `__time`, followed through the subqueries it is read from."""
    traced = _traced(node.name, select, ctes) if isinstance(node, exp.Column) else None
    return traced is not None and traced[1] == TIME


def _traced(name: str, select: exp.Select, ctes: Ctes) -> tuple[exp.Select, str] | None:
    """Where the SELECT's source column `name` comes from, followed through the subqueries it is
    read from: the SELECT over the table (or the UNNEST) that has it, and its name there; None when
    a subquery computes it."""
    inner = _inner_query(select, ctes)
    if inner is None or any(name in _unnest_names(join) for join in unnest_joins(select) or []):
        return select, name
    for item in inner.expressions:
        if isinstance(item, exp.Star):
            return _traced(name, inner, ctes)
        if item.alias_or_name == name:
            value = item.unalias()
            return _traced(value.name, inner, ctes) if isinstance(value, exp.Column) else None
    return None


def _unnest_names(join: exp.Join) -> list[str]:
    alias = join.this.args.get("alias")
    return [c.name for c in alias.columns] if alias is not None else []


def _on_unnested(node: exp.In, ctes: Ctes) -> bool:
    """Whether an IN (subquery) in a WHERE tests a column an UNNEST of that SELECT gives."""
    where = node.find_ancestor(exp.Where)
    select = None if where is None else where.parent
    operand = node.this
    return (
        isinstance(select, exp.Select)
        and isinstance(operand, exp.Column)
        and _unnested(operand.name, select, ctes)
    )


def _unnested(name: str, select: exp.Select, ctes: Ctes) -> bool:
    """Whether the SELECT's source column `name` is an UNNEST's, followed through subqueries."""
    traced = _traced(name, select, ctes)
    if traced is None:
        return False
    origin, column = traced
    return any(column in _unnest_names(join) for join in unnest_joins(origin) or [])
