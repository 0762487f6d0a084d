"""A planned SQL statement: its outputs, the native query that answers it, and how the native
answer becomes SQL rows (projected, ordered, offset, limited; timestamps in the session's zone).

Also the parts both planners share (`strata.sql.planner` for selections, `strata.sql.aggregation`
for aggregations): expression virtual columns, context flags, output lookup.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from zoneinfo import ZoneInfo

from sqlglot import exp

from strata.query.errors import QueryUnsupported, TypeMismatch, invalid
from strata.sql.column_types import sql_type_name
from strata.sql.expressions import ExpressionWriter, expression_kind
from strata.sql.filters import TIME
from strata.sql.sql_types import BOOLEAN, DATE, TIMESTAMP, sql_type
from strata.sql.subquery_limits import rows_exceeded
from timeline import format_instant, parse_instant


@dataclass
class Output:
    name: str
    source: str  # key in the native row: a dimension / aggregator / post-aggregator name, or TIME
    druid_type: str  # STRING, LONG, DOUBLE, FLOAT; LONG with sql_type TIMESTAMP for time
    timestamp: bool = False  # an expression giving epoch ms that SQL types as TIMESTAMP
    sql_type_name: str | None = None  # the SQL type when the Druid type does not say it (DATE, BOOLEAN)

    @property
    def sql_type(self) -> str:
        if self.sql_type_name is not None:
            return self.sql_type_name
        if self.source == TIME or self.timestamp:
            return "TIMESTAMP"
        return sql_type_name(self.druid_type)


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
    raw_times: bool = False  # a stage of a composed plan: timestamps stay epoch ms
    row_bound: int | None = None  # maxSubqueryRows: more rows than this is an error

    def rows(self, native_results: list[Any]) -> list[list[Any]]:
        if self.native is None:
            rows = self.constant_rows
        else:
            rows = list(_native_rows(self, native_results))
            if self.row_bound is not None and len(rows) > self.row_bound:
                raise rows_exceeded(self.row_bound)
            if not rows and self.empty_row:
                rows = [[0 if o.source in self.zero_sources else None for o in self.outputs]]
        if self.order:
            for index, descending in reversed(self.order):
                key = _sort_number if self.outputs[index].sql_type in FLOATING else _sort_row
                rows.sort(key=functools.partial(key, index), reverse=descending)
        end = None if self.limit is None else self.offset + self.limit
        return rows[self.offset : end]


def expression_output(name: str, source: str, kind: str, node: exp.Expr, is_time: bool = False) -> Output:
    """The output of an expression, typed as Druid SQL types it (`strata.sql.sql_types`): epoch
    milliseconds of a TIMESTAMP or DATE print as instants, a BOOLEAN's 1/0 as true/false."""
    typed = sql_type(node)
    if (is_time or typed in (TIMESTAMP, DATE)) and kind.startswith(("ARRAY<", "COMPLEX<")):
        _refuse_array_time(node, kind)
    marked = typed if typed in (DATE, BOOLEAN) else None
    return Output(name, source, kind, is_time or typed in (TIMESTAMP, DATE), marked)


def _refuse_array_time(node: exp.Expr, kind: str) -> None:
    """An ARRAY or a nested value is no instant: Druid's validator refuses MILLIS_TO_TIMESTAMP (or
    a cast to a TIMESTAMP) of one with Calcite's message."""
    while isinstance(node, (exp.Paren, exp.Alias)):
        node = node.this
    name = node.name.upper() if isinstance(node, exp.Anonymous) else node.key.upper()
    shown = {"ARRAY<LONG>": "BIGINT ARRAY", "ARRAY<DOUBLE>": "DOUBLE ARRAY", "ARRAY<STRING>": "VARCHAR ARRAY"}
    raise TypeMismatch(
        f"Cannot apply '{name}' to arguments of type '{name}(<{shown.get(kind, kind.upper())}>)'"
    )


def context_flag(context: Mapping[str, Any], key: str, default: bool) -> bool:
    value = context.get(key, default)
    return value if isinstance(value, bool) else str(value).lower() == "true"


def _sort_row(index: int, row: list[Any]) -> tuple[int, Any]:
    return order_key(row[index])


FLOATING = ("FLOAT", "DOUBLE")  # SQL types whose values may be NaN or infinite


def _sort_number(index: int, row: list[Any]) -> tuple[int, float, int]:
    """A double's place as Java's `Double.compare` gives it: -Infinity first, NaN after +Infinity;
    a native answer spells those three as strings ("NaN"), which Python would not compare with
    floats; null before them all."""
    value = row[index]
    if value is None:
        return (0, 0.0, 0)
    try:
        number = float(value)
    except (TypeError, ValueError):  # not a number at all: after every number
        return (2, 0.0, 0)
    return (1, math.inf, 1) if math.isnan(number) else (1, number, 0)


def order_key(value: Any) -> tuple[int, Any]:
    """Druid's order of a value: null first; an ARRAY element by element (its null elements
    first), a shorter array before a longer one it begins."""
    if value is None:
        return (0, 0)
    if isinstance(value, list):
        return (1, tuple(order_key(v) for v in value))
    return (1, value)


def _native_rows(plan: SqlPlan, results: list[Any]) -> Any:
    assert plan.native is not None
    kind = plan.native["queryType"]
    zone = None if plan.time_zone is None else ZoneInfo(plan.time_zone)
    _scan_value = _raw_value if plan.raw_times else functools.partial(sql_value, zone=zone)
    if kind == "scan":  # the hot path of large selections: only timestamps need rewriting
        for batch in results:
            index = {c: i for i, c in enumerate(batch["columns"])}
            picks = [index[o.source] for o in plan.outputs]
            stamps = [
                (i, o)
                for i, o in enumerate(plan.outputs)
                if o.source == TIME or o.timestamp or o.sql_type_name is not None
            ]
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


def _raw_value(out: Output, value: Any) -> Any:
    return value


def sql_value(out: Output, value: Any, zone: ZoneInfo | None) -> Any:
    """A value as Druid SQL prints it: timestamps as ISO instants in the session's zone, booleans
    as true/false."""
    if out.sql_type_name == "BOOLEAN" and isinstance(value, (int, float)):
        return bool(value)
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


def expression_filter(writer: ExpressionWriter) -> Any:
    def make(node: exp.Expr) -> dict[str, Any]:
        return {"type": "expression", "expression": writer.write(node)}

    return make


def output_index(node: exp.Expr, outputs: list[Output], items: list[tuple[str, exp.Expr]]) -> int:
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
