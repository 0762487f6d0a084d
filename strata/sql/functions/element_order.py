"""The order Druid reads unnested rows in, for LATEST's ties.

Druid's last aggregators keep the last row read among those of the greatest time (`time >=
lastTime`), and the rows unnested from one row share its time: LATEST of them is the row's last
element. A joined `UNNEST(expr) AS u(c)` runs as `LATERAL (SELECT UNNEST(expr) AS c) AS u`, in the
row's order (`in_row_order`); a SELECT whose LATEST reads such rows asks each of its unnests for
the element's position too (`positions`), and orders ties by them, outermost first, as Druid's
cursor reads them. Only that SELECT's unnests carry the position: it aggregates, so no `*` of it
shows the column.
"""

from __future__ import annotations

from sqlglot import exp

from strata.query.columns import ELEMENT_POSITION

_WANTS_POSITION = "element_position"  # meta key of an UNNEST whose LATERAL must carry the position


def in_row_order(node: exp.Unnest) -> exp.Expr:
    """A joined `UNNEST(expr) AS u(c)` as `LATERAL (SELECT UNNEST(expr) AS c) AS u`: Druid's unnest
    hands on each row's elements in turn, in the row's order (what ARRAY_AGG and STRING_AGG
    collect), and DuckDB's UNNEST of an expression in FROM runs as a join that interleaves the
    rows (the first element of every row, then the second); a lateral subquery keeps them."""
    if not _row_ordered(node):
        return node
    alias = node.args["alias"]
    values = node.expressions[0]
    elements = exp.select(exp.alias_(exp.Explode(this=values), alias.columns[0].copy()))
    lateral = exp.Lateral(this=exp.Subquery(this=elements), alias=exp.TableAlias(this=alias.this.copy()))
    lateral.meta["values"] = values
    if node.meta.get(_WANTS_POSITION):
        _add_position(lateral)
    return lateral


def positions(node: exp.Expr) -> list[exp.Column]:
    """The element positions of the unnests joined in the SELECT around `node`, outermost first
    (each unnest asked to carry its position); none when it joins none."""
    select = node.find_ancestor(exp.Select)
    joins = (select.args.get("joins") or []) if select is not None else []
    out: list[exp.Column] = []
    for join in joins:
        item = join.this
        if isinstance(item, exp.Unnest) and _row_ordered(item):
            item.meta[_WANTS_POSITION] = True
        elif isinstance(item, exp.Lateral) and "values" in item.meta:
            _add_position(item)
        else:
            continue
        out.append(exp.column(ELEMENT_POSITION, table=item.args["alias"].this.name, quoted=True))
    return out


def _row_ordered(node: exp.Unnest) -> bool:
    alias = node.args.get("alias")
    return (
        alias is not None and bool(alias.name) and len(alias.columns) == 1 and not node.args.get("offset")
        and isinstance(node.parent, exp.Join) and len(node.expressions) == 1
    )  # fmt: skip


def _add_position(lateral: exp.Lateral) -> None:
    select = lateral.this.this
    if any(e.alias_or_name == ELEMENT_POSITION for e in select.expressions):
        return
    position = exp.func("generate_subscripts", lateral.meta["values"].copy(), exp.Literal.number(1))
    select.select(exp.alias_(position, exp.to_identifier(ELEMENT_POSITION, quoted=True)), copy=False)
