"""An aggregating SELECT split where Druid splits it: the grouping on the data nodes, the rest on
the broker.

Druid runs GROUP BY and the aggregates of a one-table block as a native query and computes what
lies above them (window functions, expressions the native layer lacks, HAVING and ORDER BY over
them) in the broker over the grouped rows. `split_aggregate` makes that cut on the tree: an inner
SELECT of the grouping keys and aggregate calls only (`__k0.. , __a0..`), and an outer SELECT
that reads those columns where the keys and aggregates stood.
"""

from __future__ import annotations

from sqlglot import exp

from strata.sql.functions import function_kind
from strata.sql.sql_types import unnamed_column

KEY = "__k{}"
AGGREGATE = "__a{}"


def split_aggregate(select: exp.Select, inner_source: exp.Expr) -> tuple[exp.Select, exp.Select] | None:
    """(inner, outer), or None when the block does not aggregate or groups by sets (ROLLUP, CUBE,
    GROUPING SETS: re-aggregating grouped rows is not exact for every aggregate).

    `inner_source` replaces the FROM of the outer query (the table the inner rows will be in)."""
    if select.args.get("joins") or select.args.get("from_") is None:
        return None
    group = select.args.get("group")
    if group is not None and any(
        isinstance(e, (exp.GroupingSets, exp.Rollup, exp.Cube)) for e in group.expressions
    ):
        return None
    items = [e.this if isinstance(e, exp.Alias) else e for e in select.expressions]
    keys = [_resolve(key, select, items) for key in (group.expressions if group is not None else [])]
    keys = [k for k in keys if not (isinstance(k, exp.Tuple) and not k.expressions)]
    aggregates: list[exp.Expr] = []
    for part in _parts(select):
        for node in part.find_all(exp.AggFunc, exp.Anonymous):
            if not _aggregate(node) or _windowed(node) or not _outermost(node):
                continue
            unit = node.parent if isinstance(node.parent, exp.Filter) else node  # AGG(x) FILTER (WHERE ..)
            if unit not in aggregates:
                aggregates.append(unit)
    if not keys and not aggregates and group is None:
        return None
    inner = exp.select(
        *[k.copy().as_(KEY.format(i), quoted=True) for i, k in enumerate(keys)],
        *[a.copy().as_(AGGREGATE.format(i), quoted=True) for i, a in enumerate(aggregates)],
    ).from_(select.args["from_"].this.copy())
    if not keys and not aggregates:  # GROUP BY () with nothing aggregated: one row
        inner = inner.select(exp.Count(this=exp.Star()).as_("__rows", quoted=True))
    if select.args.get("where") is not None:
        inner.set("where", select.args["where"].copy())
    if keys:
        inner.set("group", exp.Group(expressions=[exp.Literal.number(i + 1) for i in range(len(keys))]))
    elif group is not None:
        inner.set("group", group.copy())
    replacements: dict[exp.Expr, str] = {a: AGGREGATE.format(i) for i, a in enumerate(aggregates)}
    replacements.update({k: KEY.format(i) for i, k in enumerate(keys)})

    outer = select.copy()
    for key in ("where", "group", "joins"):
        outer.set(key, None)
    outer.set("from_", exp.From(this=inner_source))
    items = list(outer.expressions)
    outer.set(
        "expressions", [_named(item, unnamed_column(items, i), replacements) for i, item in enumerate(items)]
    )
    for arg in ("having", "order", "qualify"):
        value = outer.args.get(arg)
        if value is None:
            continue
        if isinstance(value, list):
            outer.set(arg, [_swap_tree(v, replacements) for v in value])
        else:
            outer.set(arg, _swap_tree(value, replacements))
    having = outer.args.get("having")
    if having is not None:
        outer.set("having", None)
        outer.set("where", exp.Where(this=having.this))
    return inner, outer


def _named(item: exp.Expr, unnamed: str, replacements: dict[exp.Expr, str]) -> exp.Expr:
    """A select item over the inner columns, keeping the name Druid gives it."""
    if isinstance(item, exp.Alias):
        return exp.alias_(_swap_tree(item.this, replacements), item.alias, quoted=True)
    if isinstance(item, exp.Star):
        return item
    name = item.name if isinstance(item, exp.Column) else unnamed
    return exp.alias_(_swap_tree(item, replacements), name, quoted=True)


def _swap_tree(node: exp.Expr, replacements: dict[exp.Expr, str]) -> exp.Expr:
    def swap(child: exp.Expr) -> exp.Expr:
        name = replacements.get(child)
        if name is None or isinstance(child, exp.Alias):
            return child
        return exp.column(name, quoted=True)

    return node.transform(swap)


def _parts(select: exp.Select) -> list[exp.Expr]:
    parts: list[exp.Expr] = list(select.expressions)
    for arg in ("having", "order", "qualify"):
        if select.args.get(arg) is not None:
            parts.append(select.args[arg])
    return parts


def _aggregate(node: exp.Expr) -> bool:
    """An aggregate call: sqlglot's own, or one of Druid's that parses as a plain call (EARLIEST,
    LATEST, DS_HLL, ...)."""
    return isinstance(node, exp.AggFunc) or function_kind(node) == "aggregate"


def _windowed(node: exp.Expr) -> bool:
    """A window function (`RANK() OVER`, `SUM(x) OVER`): computed over the grouped rows."""
    return isinstance(node.parent, exp.Window) and node.arg_key == "this"


def _outermost(node: exp.Expr) -> bool:
    parent = node.parent
    while parent is not None:
        if _aggregate(parent) and not _windowed(parent):
            return False
        if isinstance(parent, exp.Select):
            return True
        parent = parent.parent
    return True


def _resolve(key: exp.Expr, select: exp.Select, items: list[exp.Expr]) -> exp.Expr:
    """A GROUP BY term as the expression it groups by: an ordinal or a select alias resolved."""
    if isinstance(key, exp.Literal) and not key.is_string and key.this.isdigit():
        index = int(key.this) - 1
        if 0 <= index < len(items):
            return items[index]
    if isinstance(key, exp.Column) and not key.table:
        for item in select.expressions:
            if isinstance(item, exp.Alias) and item.alias == key.name:
                target: exp.Expr = item.this
                return target
    return key
