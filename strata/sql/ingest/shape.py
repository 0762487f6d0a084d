"""What part of an ingestion's SELECT can run block by block, and how its aggregations become metrics.

A SELECT over one table with only row-level work (expressions, WHERE) runs on each block of input
as it is read (`RowStage`). With rollup (GROUP BY and `finalizeAggregations: false`, as Druid's
MSQ) it still does when every output is a grouping key or one aggregation Druid's rollup keeps as
a metric: each block then computes the keys and the aggregations' inputs, and the segment build
rolls them up by time chunk, `__time` and keys, as a native spec's rollup does. COUNT(*) becomes a
`count` metric, COUNT(x) a `longSum` of 1s, SUM / MIN / MAX the long, float or double metric of
the input's type, APPROX_COUNT_DISTINCT_DS_HLL / _THETA sketch metrics; FILTER (WHERE ...) moves
into the input. Anything else (joins, windows, subqueries, DISTINCT, HAVING, LIMIT) runs whole.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlglot import exp

from strata.query.errors import invalid
from strata.sql.functions import druid_name, function_kind

COMBINABLE = ("COUNT", "SUM", "MIN", "MAX")
SKETCHES = {"APPROX_COUNT_DISTINCT_DS_HLL": "HLLSketchBuild", "APPROX_COUNT_DISTINCT_DS_THETA": "thetaSketch"}


@dataclass
class Metric:
    """An aggregation kept as a metric: its function, output name, and input column (None: COUNT(*))."""

    function: str
    name: str
    input: str | None
    params: dict[str, Any] = field(default_factory=dict)

    def to_json(self, input_type: str | None) -> dict[str, Any]:
        """The native metric spec, given the input's type (long, float, double) for SUM/MIN/MAX."""
        if self.function == "COUNT" and self.input is None:
            return {"type": "count", "name": self.name}
        if self.function == "COUNT":
            return {"type": "longSum", "name": self.name, "fieldName": self.input}
        if self.function in SKETCHES:
            return {
                "type": SKETCHES[self.function],
                "name": self.name,
                "fieldName": self.input,
                **self.params,
            }
        if input_type not in ("long", "float", "double"):
            raise invalid(
                "Cannot store [%s] of a %s value as a rollup metric: SUM, MIN and MAX take numbers",
                self.name,
                input_type or "non-numeric",
            )
        return {"type": f"{input_type}{self.function.title()}", "name": self.name, "fieldName": self.input}


@dataclass
class RowShape:
    """The block-by-block part of a SELECT over `table` (its alias in the qualified tree)."""

    table: exp.Table
    items: list[tuple[str, exp.Expr]]  # output name -> row-level expression (metric inputs included)
    where: exp.Expr | None
    metrics: list[Metric]


def items_of(select: exp.Select) -> list[tuple[str, exp.Expr]]:
    return [
        (item.alias_or_name, item.this if isinstance(item, exp.Alias) else item)
        for item in select.expressions
    ]


def is_aggregate(node: exp.Expr) -> bool:
    return isinstance(node, exp.AggFunc) or function_kind(node) == "aggregate"


def aggregating(select: exp.Select) -> bool:
    return select.args.get("group") is not None or any(is_aggregate(n) for n in select.find_all(exp.Func))


def row_shape(tree: exp.Expr, rollup: bool) -> RowShape | None:
    """The statement as a block-by-block stage, or None when it must run whole."""
    if not isinstance(tree, exp.Select) or not _one_table(tree):
        return None
    if any(
        tree.args.get(k) for k in ("joins", "distinct", "having", "order", "limit", "offset", "with_", "with")
    ):
        return None
    if tree.find(exp.Window, exp.Subquery, exp.Unnest, exp.Lateral) is not None:
        return None
    if any(isinstance(n, exp.Select) for n in tree.find_all(exp.Select) if n is not tree):
        return None
    table = tree.args["from_"].this
    where = tree.args.get("where")
    condition = where.this if where is not None else None
    if not aggregating(tree):
        return RowShape(table, items_of(tree), condition, [])
    if not rollup:
        return None
    return _rollup_shape(tree, table, condition)


def _one_table(select: exp.Select) -> bool:
    source = select.args.get("from_")
    return source is not None and isinstance(source.this, exp.Table) and bool(source.this.name)


def _rollup_shape(select: exp.Select, table: exp.Table, condition: exp.Expr | None) -> RowShape | None:
    group = select.args.get("group")
    keys = list(group.expressions) if group is not None else []
    items: list[tuple[str, exp.Expr]] = []
    metrics: list[Metric] = []
    for name, node in items_of(select):
        if not any(is_aggregate(n) for n in node.find_all(exp.Func)) and not is_aggregate(node):
            if not any(node == key for key in keys):
                return None  # an output that is no grouping key: only a whole run can say what it is
            items.append((name, node))
            continue
        metric = _metric(name, node, len(metrics))
        if metric is None:
            return None
        drafted, input_node = metric
        metrics.append(drafted)
        if drafted.input is not None and input_node is not None:
            items.append((drafted.input, input_node))
    if any(not any(key == node for _, node in items) for key in keys):
        return None  # grouped by something not kept: each block cannot roll it up as its output
    return RowShape(table, items, condition, metrics)


def _metric(name: str, node: exp.Expr, index: int) -> tuple[Metric, exp.Expr | None] | None:
    """The metric an output aggregation becomes and the row-level input it reads, or None."""
    condition: exp.Expr | None = None
    if isinstance(node, exp.Filter):
        condition = node.expression.this if isinstance(node.expression, exp.Where) else node.expression
        node = node.this
    function = druid_name(node) or ""
    args = _arguments(node)
    if any(is_aggregate(n) for a in args for n in a.find_all(exp.Func)):
        return None
    column = f"__agg{index}"
    if (function == "COUNT" and not args) or (function == "COUNT" and isinstance(args[0], exp.Star)):
        if condition is None:
            return Metric("COUNT", name, None), None
        return Metric("COUNT", name, column), _when(condition, exp.Literal.number(1), exp.Literal.number(0))
    if function == "COUNT" and len(args) == 1 and not isinstance(node.this, exp.Distinct):
        counted = exp.Not(this=exp.Is(this=args[0].copy(), expression=exp.Null()))
        one = _when(counted if condition is None else exp.and_(condition, counted), exp.Literal.number(1))
        return Metric("COUNT", name, column), exp.Coalesce(this=one, expressions=[exp.Literal.number(0)])
    if function in ("SUM", "MIN", "MAX") and len(args) == 1:
        return Metric(function, name, column), _when(condition, args[0].copy()) if condition else args[
            0
        ].copy()
    if function in SKETCHES and args:
        params = _sketch_params(function, args[1:])
        value = _when(condition, args[0].copy()) if condition else args[0].copy()
        return Metric(function, name, column, params), value
    return None


def _arguments(node: exp.Expr) -> list[exp.Expr]:
    if isinstance(node, exp.Anonymous):
        return list(node.expressions)
    out = [node.this] if isinstance(node.this, exp.Expr) else []
    if isinstance(node.this, exp.Distinct):
        out = list(node.this.expressions)
    return out + list(node.expressions)


def _when(condition: exp.Expr | None, value: exp.Expr, otherwise: exp.Expr | None = None) -> exp.Expr:
    case = exp.Case(ifs=[exp.If(this=condition, true=value)])
    return case.else_(otherwise) if otherwise is not None else case


def _sketch_params(function: str, args: list[exp.Expr]) -> dict[str, Any]:
    values = [a.to_py() if isinstance(a, exp.Literal) else None for a in args]
    if any(v is None for v in values):
        raise invalid("Parameters of [%s] must be literals", function)
    if function == "APPROX_COUNT_DISTINCT_DS_HLL":
        return dict(zip(("lgK", "tgtHllType"), values, strict=False))
    return dict(zip(("size",), values, strict=False))
