"""Planning aggregations: GROUP BY, aggregate functions, HAVING and ORDER BY/LIMIT of an aggregating
SELECT become a timeseries, topN or groupBy (with time floors as query granularities).
"""

from __future__ import annotations

from typing import Any

from sqlglot import exp

from strata.query.errors import QueryUnsupported, invalid
from strata.sql.expressions import FLOOR_UNITS, ExpressionWriter, expression_kind, is_time_expression
from strata.sql.filters import TIME, column_name, literal, to_filter
from strata.sql.plan import (
    Output,
    SqlPlan,
    VirtualColumns,
    context_flag,
    expression_filter,
    expression_output,
    output_index,
)
from strata.sql.session import current_zone

MAX_TOPN_LIMIT = 100_000  # Druid's maxTopNLimit


class Aggregation:
    """Builds the aggregators, post-aggregators and grouping of an aggregating SELECT."""

    def __init__(
        self, types: dict[str, str], now: int, virtual: VirtualColumns, writer: ExpressionWriter
    ) -> None:
        self.types = types
        self.now = now
        self.virtual = virtual
        self.writer = writer
        self.dimension_exprs: list[tuple[exp.Expr, str, str, bool]] = []  # (node, name, type, time)
        self.aggs: list[dict[str, Any]] = []
        self.posts: list[dict[str, Any]] = []

    def plan(
        self,
        select: exp.Select,
        items: list[tuple[str, exp.Expr]],
        group: exp.Group | None,
        native: dict[str, Any],
        outputs: list[Output],
    ) -> SqlPlan:
        granularity: Any = "all"
        dims: list[str] = []
        grouped: list[exp.Expr] = []
        granularity_node: exp.Expr | None = None
        keys, sets = grouping_keys(group)
        dim_of: dict[exp.Expr, str] = {}
        for key in keys:
            node = _resolve(key, items)
            gran = _time_floor(node) if sets is None else None  # subtotals group time as a dimension
            if gran is not None and granularity_node is None:
                granularity, granularity_node = gran, node
            else:  # a further time floor groups as a virtual column, as any expression
                col = column_name(node)
                if col == TIME:  # the raw time as a dimension: a LONG virtual column, typed TIMESTAMP
                    col = None
                if col is None:
                    text = self.writer.write(node)
                    col, kind = self.virtual.add(text)
                    self.types[col] = kind
                    self.dimension_exprs.append((node, col, kind, is_time_expression(text)))
                elif col not in self.types:
                    raise invalid("Column '%s' not found in any table", col)
                if col not in dims:  # grouping twice by one column is grouping by it once
                    dims.append(col)
                dim_of[key] = col
            grouped.append(node)
        if sets is not None:
            if not dims or TIME in dims:
                raise QueryUnsupported("GROUPING SETS without dimensions, or over __time itself")
            native["subtotalsSpec"] = [list(dict.fromkeys(dim_of[k] for k in s)) for s in sets]
        for name, node in items:
            if granularity_node is not None and node == granularity_node:
                outputs.append(Output(name, TIME, "LONG"))
            elif (grouped_expr := self._grouped_expression(node)) is not None:
                _, source, kind, is_time = grouped_expr
                outputs.append(expression_output(name, source, kind, node, is_time))
            elif column_name(node) is not None and node.find(exp.AggFunc) is None:
                col = column_name(node)
                assert col is not None
                if col not in dims:
                    raise invalid("Expression '%s' is not being grouped", col)
                outputs.append(Output(name, col, self.types.get(col, "STRING")))
            else:
                source, kind = self.value(node, name)
                outputs.append(expression_output(name, source, kind, node))
        if select.args.get("having") is not None:
            native["having"] = {
                "type": "filter",
                "filter": self._having(select.args["having"].this, items, outputs),
            }
        native.update(granularity=granularity, aggregations=self.aggs, postAggregations=self.posts)
        topn = (
            None if sets is not None else self._topn_metric(select, items, outputs, dims, granularity, native)
        )
        if topn is not None:
            metric, threshold = topn
            dim = dims[0]
            native.update(
                queryType="topN",
                dimension={
                    "type": "default",
                    "dimension": dim,
                    "outputName": dim,
                    "outputType": self.types.get(dim, "STRING"),
                },
                metric=metric,
                threshold=threshold,
            )
        elif dims or native.get("having") or sets is not None:
            native.update(
                queryType="groupBy",
                dimensions=[
                    {
                        "type": "default",
                        "dimension": d,
                        "outputName": d,
                        "outputType": self.types.get(d, "STRING"),
                    }
                    for d in dims
                ],
            )
        else:
            native["queryType"] = "timeseries"
            if granularity != "all":
                native["context"] = {**native["context"], "skipEmptyBuckets": True}
        counts = {
            a["name"]
            for a in self.aggs
            if a["type"] in ("count", "HLLSketchBuild")
            or (a["type"] == "filtered" and a["aggregator"]["type"] == "count")
        }
        return SqlPlan(outputs, native, empty_row=not dims and granularity == "all", zero_sources=counts)

    def _topn_metric(
        self,
        select: exp.Select,
        items: list[tuple[str, exp.Expr]],
        outputs: list[Output],
        dims: list[str],
        granularity: Any,
        native: dict[str, Any],
    ) -> tuple[dict[str, Any], int] | None:
        """Druid's rule for topN: one dimension, no time bucketing, no HAVING, ordered by one
        aggregate and limited to at most `MAX_TOPN_LIMIT` rows, with no offset, while the context's
        `useApproximateTopN` is true (the default): (metric spec, threshold), else None."""
        if len(dims) != 1 or granularity != "all" or native.get("having"):
            return None
        if not context_flag(native.get("context", {}), "useApproximateTopN", True):
            return None
        order, limit, offset = select.args.get("order"), select.args.get("limit"), select.args.get("offset")
        if order is None or limit is None or offset is not None or len(order.expressions) != 1:
            return None
        threshold = literal(limit.expression, 0)
        if not isinstance(threshold, int) or not 1 <= threshold <= MAX_TOPN_LIMIT:
            return None
        key = order.expressions[0]
        source = outputs[output_index(key.this, outputs, items)].source
        if source == dims[0] or source == TIME:
            return None  # ordered by the dimension itself: a groupBy, as in Druid
        metric: dict[str, Any] = {"type": "numeric", "metric": source}
        if not key.args.get("desc"):
            metric = {"type": "inverted", "metric": metric}
        return metric, threshold

    def _grouped_expression(self, node: exp.Expr) -> tuple[exp.Expr, str, str, bool] | None:
        for entry in self.dimension_exprs:
            if entry[0] == node:
                return entry
        return None

    def value(self, node: exp.Expr, name: str) -> tuple[str, str]:
        """An aggregator or post-aggregator computing `node`; (its name, its Druid type)."""
        if isinstance(node, exp.Paren):
            return self.value(node.this, name)
        flt = None
        if isinstance(node, exp.Filter):
            flt = to_filter(node.expression.this, self.types, self.now, expression_filter(self.writer))
            node = node.this
        if isinstance(node, exp.AggFunc) or (
            isinstance(node, exp.Anonymous) and node.name.upper() in _AGG_FUNCS
        ):
            agg, kind = self._aggregator(node, name, flt)
            if agg is not None:
                self.aggs.append(
                    agg
                    if flt is None
                    else {"type": "filtered", "name": name, "filter": flt, "aggregator": agg}
                )
            return name, kind
        # arithmetic and functions over aggregates: an expression post-aggregator, as Druid
        # plans them (LONG stays LONG: COUNT(*) * 2 is a BIGINT, SUM(a) / COUNT(*) divides integers)
        return self._expression_post(node, name)

    def _expression_post(self, node: exp.Expr, name: str) -> tuple[str, str]:
        """Any other expression over aggregates, grouped columns and constants: Druid's
        `expression` post-aggregator, each aggregate inside it computed by its own aggregator."""
        copy = node.copy()
        kinds = dict(self.types)
        outermost = [
            a
            for a in copy.find_all(exp.AggFunc, exp.Anonymous)
            if (isinstance(a, exp.AggFunc) or a.name.upper() in _AGG_FUNCS)
            and not any(isinstance(p, exp.AggFunc) for p in _ancestors(a, copy))
        ]
        for i, agg in enumerate(outermost):
            inner = agg.parent if isinstance(agg.parent, exp.Filter) else agg
            source, kind = self.value(inner.copy(), f"{name}:{i}")
            kinds[source] = kind
            inner.replace(exp.column(source, quoted=True))
        text = self.writer.write(copy)
        kind = expression_kind(text, kinds)
        self.posts.append({"type": "expression", "name": name, "expression": text, "outputType": kind})
        return name, kind

    def _aggregator(
        self, node: exp.Expr, name: str, flt: dict[str, Any] | None
    ) -> tuple[dict[str, Any] | None, str]:
        """The aggregator named `name` (None when `name` is a post-aggregator added here)."""
        fn = node.name.upper() if isinstance(node, exp.Anonymous) else type(node).__name__.upper()
        arg = node.expressions[0] if isinstance(node, exp.Anonymous) and node.expressions else node.this
        if fn == "COUNT" and (arg is None or isinstance(arg, exp.Star)):
            return {"type": "count", "name": name}, "LONG"
        distinct = fn == "COUNT" and isinstance(arg, exp.Distinct)
        if distinct or fn in ("APPROXDISTINCT", "APPROX_COUNT_DISTINCT"):
            target = arg.expressions[0] if isinstance(arg, exp.Distinct) else arg
            return {
                "type": "HLLSketchBuild",
                "name": name,
                "fieldName": self._col(target),
                "round": True,
            }, "LONG"
        col = self._col(arg)
        kind = self.types.get(col, "STRING")
        numeric = "long" if kind == "LONG" else "double"
        not_null = {"type": "not", "field": {"type": "null", "column": col}}
        if fn == "COUNT":
            return {
                "type": "filtered",
                "name": name,
                "filter": not_null,
                "aggregator": {"type": "count", "name": name},
            }, "LONG"
        if fn in ("SUM", "MIN", "MAX", "AVG") and kind == "STRING":
            raise invalid("Cannot apply '%s' to arguments of type '%s(<VARCHAR>)'", fn, fn)
        if fn in ("SUM", "MIN", "MAX"):
            return {"type": f"{numeric}{fn.title()}", "name": name, "fieldName": col}, numeric.upper()
        if fn == "AVG":
            both = {"type": "and", "fields": [not_null, flt]} if flt is not None else not_null
            self.aggs.append(
                {
                    "type": "filtered",
                    "name": f"{name}:sum",
                    "filter": both,
                    "aggregator": {"type": f"{numeric}Sum", "name": f"{name}:sum", "fieldName": col},
                }
            )
            self.aggs.append(
                {
                    "type": "filtered",
                    "name": f"{name}:count",
                    "filter": both,
                    "aggregator": {"type": "count", "name": f"{name}:count"},
                }
            )
            self.posts.append(
                {
                    "type": "arithmetic",
                    "name": name,
                    "fn": "quotient",
                    "fields": [
                        {"type": "fieldAccess", "fieldName": f"{name}:sum"},
                        {"type": "fieldAccess", "fieldName": f"{name}:count"},
                    ],
                }
            )
            return None, "DOUBLE"
        if fn in ("EARLIEST", "LATEST", "ANY_VALUE", "ANYVALUE"):
            if kind.startswith("ARRAY<"):  # no native first/last of arrays: computed on the broker
                raise QueryUnsupported(f"{fn} of an {kind} value: planned relationally")
            which = "Last" if fn == "LATEST" else "First"
            prefix = "string" if kind == "STRING" else numeric
            return {"type": f"{prefix}{which}", "name": name, "fieldName": col}, kind
        raise QueryUnsupported(f"Aggregate function [{fn}] is not supported")

    def _col(self, node: exp.Expr | None) -> str:
        if node is None:
            raise QueryUnsupported("This aggregate needs an argument")
        col = column_name(node)
        if col is None:  # an expression: aggregated through a virtual column, as Druid plans it
            name, kind = self.virtual.add(self.writer.write(node))
            self.types[name] = kind
            return name
        if col not in self.types and col != TIME:
            raise invalid("Column '%s' not found in any table", col)
        return col

    def _having(
        self, node: exp.Expr, items: list[tuple[str, exp.Expr]], outputs: list[Output]
    ) -> dict[str, Any]:
        node = node.unnest()
        if isinstance(node, (exp.And, exp.Or)):
            kind = "and" if isinstance(node, exp.And) else "or"
            return {"type": kind, "fields": [self._having(x, items, outputs) for x in node.flatten()]}
        if isinstance(node, exp.Not):
            return {"type": "not", "field": self._having(node.this, items, outputs)}
        if isinstance(node, (exp.GT, exp.GTE, exp.LT, exp.LTE, exp.EQ, exp.NEQ)):
            target = self._having_target(node.this, items, outputs)
            rewritten = node.copy()
            rewritten.set("this", exp.column(target, quoted=True))
            types = {**self.types, target: "DOUBLE"}
            return to_filter(rewritten, types, self.now)
        raise QueryUnsupported(f"HAVING [{node.sql(dialect='druid')}] is not supported")

    def _having_target(self, node: exp.Expr, items: list[tuple[str, exp.Expr]], outputs: list[Output]) -> str:
        if isinstance(node, exp.Column):
            for o in outputs:
                if o.name == node.name:
                    return o.source
        for (_, item), o in zip(items, outputs, strict=False):
            if item == node:
                return o.source
        name = f"having:{len(self.aggs)}"
        source, _ = self.value(node, name)
        return source


_AGG_FUNCS = {"EARLIEST", "LATEST", "ANY_VALUE", "APPROX_COUNT_DISTINCT"}


def grouping_keys(group: exp.Group | None) -> tuple[list[exp.Expr], list[list[exp.Expr]] | None]:
    """The GROUP BY terms (each once) and, for GROUPING SETS / ROLLUP / CUBE, the sets grouped by
    (in Calcite's order: ROLLUP(a, b) is (a, b), (a), (); CUBE(a, b) is (a, b), (a), (b), ()),
    each with the plain terms beside them; None for a plain GROUP BY."""
    if group is None:
        return [], None
    plain: list[exp.Expr] = []
    products: list[list[list[exp.Expr]]] = []
    for term in group.expressions:
        if isinstance(term, exp.Rollup):
            cols = list(term.expressions)
            products.append([cols[:i] for i in range(len(cols), -1, -1)])
        elif isinstance(term, exp.Cube):
            cols = list(term.expressions)
            bits = len(cols)
            products.append(
                [
                    [c for j, c in enumerate(cols) if mask >> (bits - 1 - j) & 1]
                    for mask in range(2**bits - 1, -1, -1)
                ]
            )
        elif isinstance(term, exp.GroupingSets):
            products.append([_set_members(s) for s in term.expressions])
        elif isinstance(term, exp.Tuple) and not term.expressions:
            continue  # GROUP BY (): the one group of every row
        else:
            plain.append(term)
    if not products:
        return plain, None
    sets: list[list[exp.Expr]] = [list(plain)]
    for choices in products:
        sets = [[*base, *choice] for base in sets for choice in choices]
    keys = list(dict.fromkeys([*plain, *(k for s in sets for k in s)]))
    return keys, sets


def _set_members(node: exp.Expr) -> list[exp.Expr]:
    if isinstance(node, exp.Tuple):
        return list(node.expressions)
    if isinstance(node, exp.Paren):
        return [node.this]
    return [node]


def _ancestors(node: exp.Expr, root: exp.Expr) -> list[exp.Expr]:
    out = []
    parent = node.parent
    while parent is not None and parent is not root.parent:
        out.append(parent)
        parent = parent.parent
    return out


def _resolve(key: exp.Expr, items: list[tuple[str, exp.Expr]]) -> exp.Expr:
    """A GROUP BY key: an ordinal or an output alias stands for its select item."""
    if isinstance(key, exp.Literal) and not key.is_string:
        index = int(key.this) - 1
        if not 0 <= index < len(items):
            raise invalid("GROUP BY position %s is out of range", key.this)
        return items[index][1]
    if isinstance(key, exp.Column):
        for name, item in items:
            if name == key.name and column_name(item) != key.name:
                return item
    return key


def _time_floor(node: exp.Expr) -> Any:
    """The granularity of TIME_FLOOR / FLOOR(__time TO unit) / DATE_TRUNC over __time, else None."""
    is_floor = isinstance(node, exp.Anonymous) and node.name.upper() == "TIME_FLOOR"
    if is_floor and len(node.expressions) >= 2 and column_name(node.expressions[0]) == TIME:
        period = literal(node.expressions[1], 0)
        gran: dict[str, Any] = {"type": "period", "period": period}
        if len(node.expressions) >= 3 and not isinstance(node.expressions[2], exp.Null):
            gran["origin"] = literal(node.expressions[2], 0)
        if len(node.expressions) >= 4:
            gran["timeZone"] = literal(node.expressions[3], 0)
        return _zoned(gran)
    if isinstance(node, exp.Floor) and column_name(node.this) == TIME and node.args.get("to") is not None:
        unit = node.args["to"].name.upper()
        if unit in FLOOR_UNITS:
            return _zoned({"type": "period", "period": FLOOR_UNITS[unit]})
    if isinstance(node, (exp.TimestampTrunc, exp.DateTrunc)) and column_name(node.this) == TIME:
        unit = node.unit.name.upper() if node.unit is not None else ""
        if unit in FLOOR_UNITS:
            return _zoned({"type": "period", "period": FLOOR_UNITS[unit]})
    return None


def _zoned(gran: dict[str, Any]) -> dict[str, Any]:
    """A time floor without its own zone floors in the session's (sqlTimeZone)."""
    zone = current_zone()
    if zone is not None and gran.get("timeZone") is None:
        gran["timeZone"] = zone
    return gran
