"""How an ingestion's result is laid out in segments, as Druid's MSQ lays it out.

- Every output column but `__time` and the rollup's metrics is a dimension, typed as SQL computed
  it; CLUSTERED BY's columns come first, so a segment's rows sort by `__time`, then them, then the
  rest in SELECT order. Without `__time` (PARTITIONED BY ALL), every row's time is 1970-01-01.
- Rows per segment: `rowsPerSegment` (Druid's default 3,000,000). A REPLACE clustered by string
  columns cuts each time chunk into ranges of those columns (`range` shard specs, which queries
  prune by); otherwise segments are numbered.
- With rollup, the query granularity is the `TIME_FLOOR` / `FLOOR` the SELECT groups `__time` by.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from strata.query.errors import invalid
from strata.sql.dialect import DIALECT
from strata.sql.ingest.clauses import IngestStatement
from strata.sql.ingest.columns import TIME, Column
from strata.sql.ingest.shape import Metric, items_of
from strata.sql.ingest.targets import NAMES, PERIODS

DEFAULT_ROWS_PER_SEGMENT = 3_000_000  # MSQ's rowsPerSegment
UNLIMITED = 2**31 - 1


@dataclass
class Layout:
    outputs: list[Column]  # the statement's output columns, in SELECT order
    dimensions: list[Column]
    metrics: list[dict[str, Any]]
    has_time: bool
    query_granularity: str
    rollup: bool
    partitions: dict[str, Any]
    clustered: list[str]
    rows_per_segment: int
    max_parse_exceptions: int

    def data_schema(self, data_source: str) -> dict[str, Any]:
        timestamp: dict[str, Any] = {"column": TIME, "format": "millis"}
        if not self.has_time:
            timestamp["missingValue"] = 0  # Druid's rows without a time: 1970-01-01
        return {
            "dataSource": data_source,
            "timestampSpec": timestamp,
            "dimensionsSpec": {"dimensions": [{"name": d.name, "type": d.kind} for d in self.dimensions],
                               **({"clusteredBy": self.clustered} if self.clustered else {})},
            "metricsSpec": self.metrics,
        }  # fmt: skip


def layout_of(
    st: IngestStatement,
    granularity: str,
    columns: Sequence[Column],
    metrics: Sequence[Metric],
    tree: exp.Expr,
    rollup: bool,
    ctx: Mapping[str, Any],
) -> Layout:
    by_name = {c.name: c for c in columns}
    select = tree if isinstance(tree, exp.Select) else tree.find(exp.Select)
    items = items_of(select) if select is not None else []
    metric_names = {m.name for m in metrics}
    metric_json = [m.to_json(by_name[m.input].kind if m.input in by_name else None) for m in metrics]
    outputs = [by_name[name] if name in by_name else _metric_column(name, metric_json) for name, _ in items]
    if not items:  # a set operation: its columns as DuckDB typed them
        outputs = [c for c in columns if not c.name.startswith("__agg")]
    clustered = _clustered(st.clustered_by, outputs, metric_names)
    dims = [c for c in outputs if c.name != TIME and c.name not in metric_names]
    dims = [d for name in clustered for d in dims if d.name == name] + [
        d for d in dims if d.name not in clustered
    ]
    rows = int(ctx.get("rowsPerSegment") or DEFAULT_ROWS_PER_SEGMENT)
    if rows < 1:
        raise invalid("Context parameter [rowsPerSegment] must be positive, got [%s]", rows)
    strings = all(any(d.name == c and d.kind == "string" for d in dims) for c in clustered)
    partitions: dict[str, Any] = {"type": "dynamic", "maxRowsPerSegment": rows}
    if clustered and st.operation == "REPLACE" and strings:
        partitions = {"type": "range", "partitionDimensions": clustered, "targetRowsPerSegment": rows}
    max_parse = int(ctx.get("maxParseExceptions", 0))
    time_node = next((node for name, node in items if name == TIME), None)
    return Layout(
        outputs=outputs,
        dimensions=dims,
        metrics=metric_json,
        has_time=TIME in by_name,
        query_granularity=_query_granularity(time_node) if rollup else "none",
        rollup=rollup,
        partitions=partitions,
        clustered=clustered,
        rows_per_segment=rows,
        max_parse_exceptions=UNLIMITED if max_parse < 0 else max_parse,
    )


def _metric_column(name: str, metrics: list[dict[str, Any]]) -> Column:
    spec = next(m for m in metrics if m["name"] == name)
    kind = str(spec["type"])
    if kind in ("count", "longSum") or kind.startswith("long"):
        return Column(name, "long", "BIGINT")
    if kind.startswith("float"):
        return Column(name, "float", "FLOAT")
    if kind.startswith("double"):
        return Column(name, "double", "DOUBLE")
    return Column(name, "complex", "OTHER")


def _clustered(items: Sequence[str], outputs: Sequence[Column], metrics: set[str]) -> list[str]:
    """CLUSTERED BY's items as output columns: by position (1-based) or by name."""
    out: list[str] = []
    for text in items:
        try:
            ordered = (
                sqlglot.parse_one(f"SELECT 1 ORDER BY {text}", read=DIALECT).args["order"].expressions[0]
            )
        except (SqlglotError, KeyError, IndexError):
            raise invalid("Invalid CLUSTERED BY clause [%s]", text) from None
        if ordered.args.get("desc"):
            raise invalid("Invalid CLUSTERED BY clause [%s]: cannot sort in descending order.", text)
        node = ordered.this
        if isinstance(node, exp.Neg) or (isinstance(node, exp.Literal) and not node.is_string):
            number = int(node.sql())
            if number <= 0:
                raise invalid(
                    "Ordinal [%s] specified in the CLUSTERED BY clause is invalid. It must be a positive "
                    "integer.",
                    number,
                )
            if number > len(outputs):
                raise invalid(
                    "Ordinal out of range: CLUSTERED BY [%s] with %s output columns", number, len(outputs)
                )
            name = outputs[number - 1].name
        elif isinstance(node, exp.Column) and any(c.name == node.name for c in outputs):
            name = node.name
        else:
            raise invalid(
                "CLUSTERED BY [%s] must name an output column of the SELECT, by name or position", text
            )
        if name in metrics:
            raise invalid(
                "CLUSTERED BY [%s] names a metric of the rolled-up table; cluster by dimensions", text
            )
        if name not in out and name != TIME:
            out.append(name)
    return out


def _query_granularity(node: exp.Expr | None) -> str:
    """The granularity a rollup's `__time` is floored to (TIME_FLOOR(x, period) or FLOOR(x TO unit))."""
    if isinstance(node, exp.Anonymous) and node.name.upper() == "TIME_FLOOR" and len(node.expressions) == 2:
        period = node.expressions[1]
        if isinstance(period, exp.Literal) and period.is_string:
            return PERIODS.get(period.this.upper(), "none").lower()
    if isinstance(node, exp.Floor) and node.args.get("to") is not None:
        unit = node.args["to"].name.upper()
        return unit.lower() if unit in NAMES else "none"
    return "none"
