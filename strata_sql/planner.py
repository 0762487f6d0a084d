"""Druid SQL to native queries, as Druid's planner would write them for the common shapes.

Aggregations grouped only by a time floor become a timeseries (empty buckets skipped, as Druid
SQL does); other aggregations a groupBy; plain selections a scan. The rows of the native answer
are then projected, ordered, offset and limited by `SqlPlan.rows`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from zoneinfo import ZoneInfo

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from query.errors import QueryUnsupported, invalid
from strata_sql.expressions import ExpressionWriter, expression_kind, is_time_expression
from strata_sql.filters import TIME, column_name, literal, now_millis, split_time, to_filter
from strata_sql.session import current_zone
from timeline import format_instant, parse_instant

SQL_TYPES = {"STRING": "VARCHAR", "LONG": "BIGINT", "DOUBLE": "DOUBLE", "FLOAT": "FLOAT"}
_FLOOR_UNITS = {
    "SECOND": "PT1S",
    "MINUTE": "PT1M",
    "HOUR": "PT1H",
    "DAY": "P1D",
    "WEEK": "P1W",
    "MONTH": "P1M",
    "QUARTER": "P3M",
    "YEAR": "P1Y",
}
MAX_TOPN_LIMIT = 100_000  # Druid's maxTopNLimit
EXPLAIN = re.compile(r"^\s*EXPLAIN\s+PLAN\s+FOR\s+", re.IGNORECASE)


@dataclass
class Output:
    name: str
    source: str  # key in the native row: a dimension / aggregator / post-aggregator name, or TIME
    druid_type: str  # STRING, LONG, DOUBLE, FLOAT; LONG with sql_type TIMESTAMP for time
    timestamp: bool = False  # an expression giving epoch ms that SQL types as TIMESTAMP

    @property
    def sql_type(self) -> str:
        if self.source == TIME or self.timestamp:
            return "TIMESTAMP"
        return SQL_TYPES.get(self.druid_type, "VARCHAR")


@dataclass
class SqlPlan:
    outputs: list[Output]
    native: dict[str, Any] | None = None
    constant_rows: list[list[Any]] = field(default_factory=list)
    order: list[tuple[int, bool]] = field(default_factory=list)  # (output index, descending)
    offset: int = 0
    limit: int | None = None
    empty_row: bool = False  # an aggregate over no rows still answers one row
    zero_sources: set[str] = field(default_factory=set)  # counts: 0 in that row, the rest null
    explain: bool = False
    time_zone: str | None = None  # sqlTimeZone: timestamps print in it

    def rows(self, native_results: list[Any]) -> list[list[Any]]:
        if self.native is None:
            rows = self.constant_rows
        else:
            rows = list(_native_rows(self, native_results))
            if not rows and self.empty_row:
                rows = [[0 if o.source in self.zero_sources else None for o in self.outputs]]
        if self.order:
            for index, descending in reversed(self.order):
                rows.sort(key=functools.partial(_sort_row, index), reverse=descending)
        end = None if self.limit is None else self.offset + self.limit
        return rows[self.offset : end]


def _context_flag(context: Mapping[str, Any], key: str, default: bool) -> bool:
    value = context.get(key, default)
    return value if isinstance(value, bool) else str(value).lower() == "true"


def _sort_row(index: int, row: list[Any]) -> tuple[int, Any]:
    value = row[index]
    return (0, 0) if value is None else (1, value)


def _native_rows(plan: SqlPlan, results: list[Any]) -> Any:
    assert plan.native is not None
    kind = plan.native["queryType"]
    zone = None if plan.time_zone is None else ZoneInfo(plan.time_zone)
    _scan_value = functools.partial(_value, zone=zone)
    if kind == "scan":  # the hot path of large selections: only timestamps need rewriting
        for batch in results:
            index = {c: i for i, c in enumerate(batch["columns"])}
            picks = [index[o.source] for o in plan.outputs]
            stamps = [(i, o) for i, o in enumerate(plan.outputs) if o.source == TIME or o.timestamp]
            for event in batch["events"]:
                row = [event[i] for i in picks]
                for i, o in stamps:
                    row[i] = _scan_value(o, row[i])
                yield row
        return
    if kind == "topN":
        for bucket in results:
            for values in bucket["result"]:
                yield [_scan_value(o, values.get(o.source)) for o in plan.outputs]
        return
    for row in results:
        values = row["event"] if kind == "groupBy" else row["result"]
        yield [
            _scan_value(o, row["timestamp"]) if o.source == TIME else _scan_value(o, values.get(o.source))
            for o in plan.outputs
        ]


def _value(out: Output, value: Any, zone: ZoneInfo | None) -> Any:
    """A value as Druid SQL prints it: timestamps as ISO instants in the session's zone."""
    if not (out.source == TIME or out.timestamp) or value is None:
        return value
    if isinstance(value, str):
        if zone is None:
            return value
        value = parse_instant(value)
    return format_instant(int(value), zone)


class VirtualColumns:
    """The expression virtual columns of one native query, named v0, v1, ... as Druid names them."""

    def __init__(self, types: Mapping[str, str]) -> None:
        self.types = types
        self.specs: list[dict[str, Any]] = []
        self._by_text: dict[str, str] = {}

    def add(self, text: str) -> tuple[str, str]:
        """(virtual column name, Druid type) for an expression, shared when written twice."""
        kind = expression_kind(text, self.types)
        name = self._by_text.get(text)
        if name is None:
            name = f"v{len(self.specs)}"
            self._by_text[text] = name
            self.specs.append({"type": "expression", "name": name, "expression": text, "outputType": kind})
        return name, kind


_ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")


def parse(sql: str) -> tuple[exp.Expr, bool]:
    explain = bool(EXPLAIN.match(sql))
    text = EXPLAIN.sub("", sql).strip().rstrip(";")
    try:
        statements = sqlglot.parse(text, read="druid")
    except SqlglotError as e:
        # sqlglot underlines the offending token with terminal escapes: plain text for clients
        raise invalid("SQL parse failed: %s", " ".join(_ANSI_ESCAPE.sub("", str(e)).split())) from None
    if len(statements) != 1 or statements[0] is None:
        raise invalid("SQL must be exactly one statement")
    return statements[0], explain


def plan_select(
    select: exp.Select, data_source: str, columns: Mapping[str, str], context: Mapping[str, Any]
) -> SqlPlan:
    """Plan a SELECT over one datasource whose columns (name -> Druid type) are known."""
    now = now_millis()
    where = select.args.get("where")
    intervals, condition = split_time(None if where is None else where.this, now)
    types = dict(columns)
    native: dict[str, Any] = {"dataSource": data_source, "intervals": intervals}
    writer = ExpressionWriter(now)
    if condition is not None:
        native["filter"] = to_filter(condition, types, now, _expression_filter(writer))
    native["context"] = {k: v for k, v in context.items() if k not in ("sqlTimeZone",)}
    group = select.args.get("group")
    items = _select_items(select, columns)
    aggregating = group is not None or any(it.find(exp.AggFunc) for _, it in items)
    if select.args.get("distinct") and not aggregating:
        group = exp.Group(expressions=[it for _, it in items])
        aggregating = True
    virtual = VirtualColumns(types)
    builder = _Aggregation(types, now, virtual, writer) if aggregating else None
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


def _expression_filter(writer: ExpressionWriter) -> Any:
    def make(node: exp.Expr) -> dict[str, Any]:
        return {"type": "expression", "expression": writer.write(node)}

    return make


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
            else (inner.name if isinstance(inner, exp.Column) else f"EXPR${i}")
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
            outputs.append(Output(name, source, kind, is_time_expression(text)))
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
            plan.order.append((_output_index(key.this, plan.outputs, items), bool(key.args.get("desc"))))
    plan.limit, plan.offset = _limit(select)


def _output_index(node: exp.Expr, outputs: list[Output], items: list[tuple[str, exp.Expr]]) -> int:
    if isinstance(node, exp.Literal) and not node.is_string:
        index = int(node.this) - 1
        if 0 <= index < len(outputs):
            return index
        raise invalid("ORDER BY position %s is out of range", node.this)
    if isinstance(node, exp.Column):
        for i, o in enumerate(outputs):
            if o.name == node.name:
                return i
    for i, (_, item) in enumerate(items):
        if item == node:
            return i
    raise QueryUnsupported(f"ORDER BY [{node.sql(dialect='druid')}] must name a selected column")


class _Aggregation:
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
        for key in group.expressions if group is not None else []:
            node = _resolve(key, items)
            gran = _time_floor(node)
            if gran is not None and granularity_node is None:
                granularity, granularity_node = gran, node
            else:  # a further time floor groups as a virtual column, as any expression
                col = column_name(node)
                if col is None:
                    text = self.writer.write(node)
                    col, kind = self.virtual.add(text)
                    self.types[col] = kind
                    self.dimension_exprs.append((node, col, kind, is_time_expression(text)))
                if col not in dims:  # grouping twice by one column is grouping by it once
                    dims.append(col)
            grouped.append(node)
        for name, node in items:
            if (granularity_node is not None and node == granularity_node) or (
                column_name(node) == TIME and TIME in [column_name(g) for g in grouped]
            ):
                outputs.append(Output(name, TIME, "LONG"))
            elif (grouped_expr := self._grouped_expression(node)) is not None:
                _, source, kind, is_time = grouped_expr
                outputs.append(Output(name, source, kind, is_time))
            elif column_name(node) is not None and node.find(exp.AggFunc) is None:
                col = column_name(node)
                assert col is not None
                if col not in dims:
                    raise invalid("Expression '%s' is not being grouped", col)
                outputs.append(Output(name, col, self.types.get(col, "STRING")))
            else:
                source, kind = self.value(node, name)
                outputs.append(Output(name, source, kind))
        if select.args.get("having") is not None:
            native["having"] = {
                "type": "filter",
                "filter": self._having(select.args["having"].this, items, outputs),
            }
        native.update(granularity=granularity, aggregations=self.aggs, postAggregations=self.posts)
        topn = self._topn_metric(select, items, outputs, dims, granularity, native)
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
        elif dims or native.get("having"):
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
        if not _context_flag(native.get("context", {}), "useApproximateTopN", True):
            return None
        order, limit, offset = select.args.get("order"), select.args.get("limit"), select.args.get("offset")
        if order is None or limit is None or offset is not None or len(order.expressions) != 1:
            return None
        threshold = literal(limit.expression, 0)
        if not isinstance(threshold, int) or not 1 <= threshold <= MAX_TOPN_LIMIT:
            return None
        key = order.expressions[0]
        source = outputs[_output_index(key.this, outputs, items)].source
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
            flt = to_filter(node.expression.this, self.types, self.now, _expression_filter(self.writer))
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
        if unit in _FLOOR_UNITS:
            return _zoned({"type": "period", "period": _FLOOR_UNITS[unit]})
    if isinstance(node, (exp.TimestampTrunc, exp.DateTrunc)) and column_name(node.this) == TIME:
        unit = node.unit.name.upper() if node.unit is not None else ""
        if unit in _FLOOR_UNITS:
            return _zoned({"type": "period", "period": _FLOOR_UNITS[unit]})
    return None


def _zoned(gran: dict[str, Any]) -> dict[str, Any]:
    """A time floor without its own zone floors in the session's (sqlTimeZone)."""
    zone = current_zone()
    if zone is not None and gran.get("timeZone") is None:
        gran["timeZone"] = zone
    return gran
