"""Planning the statements that take more than one native query (see `strata.sql.composed`).

`plan_composed` returns a plan for a UNION ALL, a SELECT over a subquery that does more than
filter and rename, a SELECT with `IN (subquery)`, or an exact `COUNT(DISTINCT ...)`; None when the
statement is a single native query. Inner statements are planned by the caller's `plan_tree`, so
they may nest.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sqlglot import exp

from strata.query.errors import QueryError, QueryUnsupported, TypeMismatch
from strata.sql.composed import ComposedPlan, DeferredPlan, Plan, Stage, aliased_table, stage_name
from strata.sql.nullability import fold_null_tests
from strata.sql.plan import SqlPlan
from strata.sql.sandbox import Rows
from strata.sql.session import current_zone, time_zone
from strata.sql.sql_types import unnamed_column

PlanTree = Callable[[exp.Expr], Plan]


def plan_composed(tree: exp.Expr, context: Mapping[str, Any], plan_tree: PlanTree) -> Plan | None:
    """(see the module docstring); `context` is the statement's SQL context."""
    if isinstance(tree, exp.SetOperation):
        return _union(tree, plan_tree)
    if not isinstance(tree, exp.Select):
        return None
    where = tree.args.get("where")
    in_query = next((n for n in where.find_all(exp.In) if n.args.get("query")), None) if where else None
    if in_query is not None:
        return _in_subquery(tree, in_query, plan_tree)
    if not _approximate_distinct(context) and _has_distinct_count(tree):
        return _exact_distinct(tree, plan_tree)
    source = tree.args.get("from_")
    if source is not None and isinstance(source.this, exp.Subquery) and not _flattenable(source.this):
        return _over_subquery(tree, source.this, plan_tree, context)
    return None


def _union(tree: exp.SetOperation, plan_tree: PlanTree) -> Plan:
    if tree.args.get("distinct") or type(tree) is not exp.Union:
        raise QueryUnsupported("Only UNION ALL is supported (UNION, INTERSECT and EXCEPT are not)")
    stages: list[Stage] = []

    def leaf(node: exp.Expr) -> exp.Expr:
        if type(node) is exp.Union and not node.args.get("distinct"):
            return exp.union(leaf(node.this), leaf(node.expression), distinct=False)
        if isinstance(node, exp.SetOperation):
            raise QueryUnsupported("Only UNION ALL is supported (UNION, INTERSECT and EXCEPT are not)")
        stage = Stage(stage_name(), plan_tree(node.unnest() if isinstance(node, exp.Subquery) else node))
        stages.append(stage)
        return exp.select("*").from_(stage.name)

    outer = leaf(tree)
    for key in ("order", "limit", "offset"):
        if tree.args.get(key) is not None:
            outer.set(key, tree.args[key].copy())
    return ComposedPlan(stages, outer)


def _flattenable(sub: exp.Subquery) -> bool:
    inner = sub.this
    return (
        isinstance(inner, exp.Select)
        and not any(
            inner.args.get(k) for k in ("group", "having", "order", "limit", "offset", "distinct", "joins")
        )
        and inner.find(exp.AggFunc) is None
        and not isinstance((inner.args.get("from_") or exp.From()).this, exp.Subquery)
        and all(isinstance(e, (exp.Alias, exp.Column, exp.Star)) for e in inner.expressions)
    )


def _over_subquery(
    tree: exp.Select, sub: exp.Subquery, plan_tree: PlanTree, context: Mapping[str, Any]
) -> Plan:
    inner = plan_tree(sub.this)
    if isinstance(sub.this, exp.Select):  # `col IS NULL` of a NOT NULL column is false in Druid
        tree = fold_null_tests(tree.copy(), sub.this)
        sub = tree.args["from_"].this
    native = _as_query_data_source(tree, inner, context)
    if native is not None:
        return native
    stage = Stage(stage_name(), inner)
    outer = tree.copy()
    outer.set("from_", exp.From(this=aliased_table(stage.name, sub.alias)))
    return ComposedPlan([stage], outer)


def prune_union_subqueries(tree: exp.Expr) -> exp.Expr:
    """`tree` with each UNION ALL subquery in a FROM left without the columns its SELECT never
    names, as Druid's planner leaves them out of the union's native queries: a column the outer
    query ignores must not fail the statement because its branches disagree on its type (STRING
    in one table, LONG in another). Only plain branches are pruned (no grouping, ordering,
    DISTINCT or `*`, where a column's position or presence could matter)."""
    if tree.find(exp.Union) is None:
        return tree
    tree = tree.copy()
    for sub in list(tree.find_all(exp.Subquery)):
        outer = sub.parent.parent if isinstance(sub.parent, exp.From) else None
        if isinstance(outer, exp.Select) and type(sub.this) is exp.Union:
            _prune_union(sub, outer)
    return tree


def _prune_union(sub: exp.Subquery, outer: exp.Select) -> None:
    stars = [star for star in outer.find_all(exp.Star) if not _within(star, sub)]
    if any(not isinstance(star.parent, exp.Count) for star in stars):
        return
    leaves = _union_leaves(sub.this)
    if leaves is None or len({len(leaf.expressions) for leaf in leaves}) != 1:
        return
    used = {c.name for c in outer.find_all(exp.Column) if not _within(c, sub)}
    keep = [i for i, e in enumerate(leaves[0].expressions) if e.alias_or_name in used]
    if keep and len(keep) < len(leaves[0].expressions):
        for leaf in leaves:
            leaf.set("expressions", [leaf.expressions[i] for i in keep])


def _within(node: exp.Expr, ancestor: exp.Expr) -> bool:
    parent = node.parent
    while parent is not None:
        if parent is ancestor:
            return True
        parent = parent.parent
    return False


def _union_leaves(node: exp.Expr) -> list[exp.Select] | None:
    """The plain SELECTs of a tree of UNION ALLs, left to right; None if any is not plain."""
    if type(node) is exp.Union and not node.args.get("distinct"):
        left, right = _union_leaves(node.this), _union_leaves(node.expression)
        return None if left is None or right is None else left + right
    if isinstance(node, exp.Subquery):
        return _union_leaves(node.this)
    if not isinstance(node, exp.Select) or any(
        node.args.get(k) for k in ("group", "having", "order", "limit", "offset", "distinct", "qualify")
    ):
        return None
    if node.find(exp.Star) is not None or node.find(exp.AggFunc) is not None:
        return None
    return [node]


def _as_query_data_source(tree: exp.Select, inner: Plan, context: Mapping[str, Any]) -> SqlPlan | None:
    """The outer SELECT as one native query over a `query` dataSource, as Druid plans it, when the
    inner answer's native rows are exactly the subquery's rows (fields named as its columns, no
    ordering or limit applied after the native query); None otherwise."""
    from strata.sql.filters import TIME
    from strata.sql.planner import plan_select

    if not isinstance(inner, SqlPlan) or inner.native is None or inner.native["queryType"] != "groupBy":
        return None
    if inner.order or inner.limit is not None or inner.offset or inner.empty_row:
        return None
    if any(o.source != o.name or o.timestamp for o in inner.outputs):
        return None  # a field renamed, or a time bucket under another name: the broker computes it
    columns = {TIME: "LONG", **{o.name: o.druid_type for o in inner.outputs if o.source != TIME}}
    outer = tree.copy()
    for column in outer.find_all(exp.Column):
        column.set("table", None)
    outer.set("from_", exp.From(this=exp.to_table("__subquery")))
    try:
        plan = plan_select(outer, "__subquery", columns, context)
    except QueryError:
        return None  # an outer shape the native planner cannot take: the broker computes it
    assert plan.native is not None
    plan.native["dataSource"] = {"type": "query", "query": inner.native}
    return plan


def _in_subquery(tree: exp.Select, node: exp.In, plan_tree: PlanTree) -> Plan:
    query = node.args["query"]
    inner = query.this if isinstance(query, exp.Subquery) else query
    if isinstance(inner, exp.Select) and len(inner.expressions) != 1:
        raise QueryUnsupported("IN (subquery) needs a subquery selecting exactly one column")
    planned = plan_tree(inner)
    if isinstance(planned, SqlPlan) and len(planned.outputs) == 1:
        _check_joinable(planned.outputs[0].druid_type)
    stage = Stage(stage_name(), planned)
    path = _path_to(tree, node)
    zone = current_zone()  # the outer query is planned later, under the same session zone

    def build(results: Sequence[Rows]) -> Plan:
        if any(r and isinstance(r[0], (list, dict)) for r in results[0]):
            _check_joinable("ARRAY")  # multi-value or nested values found where a type did not say so
        values = sorted({r[0] for r in results[0] if r and r[0] is not None}, key=lambda v: (str(type(v)), v))
        nulls = [exp.null()] if any(r and r[0] is None for r in results[0]) else []
        outer = tree.copy()
        target = _follow(outer, path)
        if values or nulls:  # a NULL stays: `x NOT IN (..., NULL)` is never true
            items = [_literal(v) for v in values] + nulls
            replacement: exp.Expr = exp.In(this=target.this.copy(), expressions=items)
        else:
            replacement = exp.false()
        target.replace(replacement)
        with time_zone(zone):
            return plan_tree(outer)

    return DeferredPlan([stage], build)


def _check_joinable(druid_type: str) -> None:
    """Druid plans `IN (subquery)` as a join on the values, and joins on no ARRAY or
    COMPLEX<json> key: it refuses the statement, so does Strata."""
    if druid_type.startswith(("ARRAY", "COMPLEX")):
        raise TypeMismatch(
            f"Cannot join when the join condition has a column of type [{druid_type}]: "
            "IN (subquery) compares single values, not arrays or nested values"
        )


def _literal(value: Any) -> exp.Expr:
    if isinstance(value, bool):
        return exp.Literal.string(str(value).lower())
    if isinstance(value, (int, float)):
        return exp.Literal.number(value)
    return exp.Literal.string(str(value))


def _path_to(root: exp.Expr, node: exp.Expr) -> list[tuple[str, int | None]]:
    """Argument keys from `root` down to `node`, to find the same node in a copy."""
    path: list[tuple[str, int | None]] = []
    current = node
    while current is not root:
        parent = current.parent
        assert parent is not None
        key = current.arg_key
        assert key is not None
        value = parent.args.get(key)
        index = value.index(current) if isinstance(value, list) else None
        path.append((key, index))
        current = parent
    return list(reversed(path))


def _follow(root: exp.Expr, path: list[tuple[str, int | None]]) -> exp.Expr:
    node = root
    for key, index in path:
        value = node.args[key]
        node = value[index] if index is not None else value
    return node


def _approximate_distinct(context: Mapping[str, Any]) -> bool:
    value = context.get("useApproximateCountDistinct", True)
    return value if isinstance(value, bool) else str(value).lower() != "false"


def _distinct_counts(tree: exp.Select) -> list[exp.Count]:
    return [c for c in tree.find_all(exp.Count) if isinstance(c.this, exp.Distinct)]


def _has_distinct_count(tree: exp.Select) -> bool:
    return bool(_distinct_counts(tree))


def _exact_distinct(tree: exp.Select, plan_tree: PlanTree) -> Plan:
    """`COUNT(DISTINCT x)` exactly, as Druid plans it: group by the keys and x on the data nodes,
    then count x per key on the broker."""
    counts = _distinct_counts(tree)
    targets = {c.this.expressions[0].sql() for c in counts if len(c.this.expressions) == 1}
    other_aggs = [a for a in tree.find_all(exp.AggFunc) if not isinstance(a, exp.Count) or a not in counts]
    if len(targets) != 1 or other_aggs or tree.args.get("having") is not None:
        raise QueryUnsupported(
            "Exact COUNT(DISTINCT) (useApproximateCountDistinct false) is supported for one column "
            "and no other aggregate; set useApproximateCountDistinct to true for an approximate count"
        )
    column = counts[0].this.expressions[0]
    group = tree.args.get("group")
    keys = list(group.expressions) if group is not None else []
    items = [e.this if isinstance(e, exp.Alias) else e for e in tree.expressions]
    resolved = []
    for key in keys:
        if isinstance(key, exp.Literal) and not key.is_string:
            resolved.append(items[int(key.this) - 1])
        else:
            alias = next(
                (e.this for e in tree.expressions if isinstance(e, exp.Alias) and e.alias == key.name), None
            )
            resolved.append(alias if isinstance(key, exp.Column) and alias is not None else key)
    inner_items = [k.copy().as_(f"__k{i}") for i, k in enumerate(resolved)] + [column.copy().as_("__d")]
    inner = exp.select(*inner_items).from_(tree.args["from_"].this.copy())
    inner.set("joins", [j.copy() for j in tree.args.get("joins") or []])  # an UNNEST the rows come from
    if tree.args.get("where") is not None:
        inner.set("where", tree.args["where"].copy())
    inner.set(
        "group",
        exp.Group(expressions=[exp.column(f"__k{i}") for i in range(len(resolved))] + [exp.column("__d")]),
    )
    stage = Stage(stage_name(), plan_tree(inner))
    outer = tree.copy()
    outer.set("where", None)
    outer.set("joins", None)
    outer.set("from_", exp.From(this=exp.to_table(stage.name)))
    for count in list(outer.find_all(exp.Count)):
        if isinstance(count.this, exp.Distinct):
            count.replace(exp.Count(this=exp.column("__d")))
    mapping = {k.sql(): exp.column(f"__k{i}") for i, k in enumerate(resolved)}
    items = list(outer.expressions)
    for i, expr in enumerate(items):
        target = expr.this if isinstance(expr, exp.Alias) else expr
        if target.sql() in mapping:
            replacement = mapping[target.sql()].copy()
            if isinstance(expr, exp.Alias):
                target.replace(replacement)
            else:
                name = target.name if isinstance(target, exp.Column) else unnamed_column(items, i)
                expr.replace(replacement.as_(name))
    if group is not None:
        outer.set("group", exp.Group(expressions=[exp.column(f"__k{i}") for i in range(len(resolved))]))
    return ComposedPlan([stage], outer)
