"""The block-by-block stage of an ingestion: the DuckDB statement each block runs, or none at all.

`TIME_PARSE(col)` of a text column (no pattern, UTC) is read by the stage's vectorised timestamp
parser into a column of its own, which the statement reads instead of calling the function per
row. A SELECT left with nothing but column references and no WHERE needs no statement: the stage
renames columns and the ingestion types them, as a native spec does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from strata.query.errors import QueryError
from strata.sql.filters import split_time
from strata.sql.functions import druid_name
from strata.sql.ingest.columns import (
    Column,
    Signature,
    duckdb_sql,
    result_columns,
    signature_of,
    stored_as_written,
)
from strata.sql.ingest.shape import RowShape
from strata.sql.session import time_zone
from timeline import ETERNITY, Interval

ROW = "__row"  # the row's index in its block, carried through for line numbers
INPUT = "input"


@dataclass
class RowPlan:
    source: str  # the table (name in the statement) each block comes from
    signature: Signature  # its columns, as the stage conforms blocks to them
    time_parsed: list[tuple[str, str]]  # (text column, TIMESTAMP column of its TIME_PARSE)
    sql: str | None  # DuckDB over `input`; None: `renames` only
    renames: list[tuple[str, str]]  # (output, input) when no statement runs
    columns: list[Column]  # the stage's output, `__row` aside
    interval: Interval  # the part of a data source the WHERE can read at all

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "signature": [list(c) for c in self.signature],
                "timeParsed": [list(p) for p in self.time_parsed], "sql": self.sql,
                "columns": [list(r) for r in self.renames]}  # fmt: skip

    def io_config(self, tables: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
        """The input source and format the ingestion reads blocks with."""
        source = tables[self.source]
        if source["type"] == "external":
            return {"inputSource": source["inputSource"], "inputFormat": source["inputFormat"]}
        druid = {"type": "druid", "dataSource": source["dataSource"], "interval": str(self.interval)}
        return {"inputSource": druid, "inputFormat": {"type": "parquet"}}


def row_plan(
    shape: RowShape, tables: Mapping[str, Mapping[str, Any]], zone: str | None, now_ms: int
) -> RowPlan:
    name = shape.table.name
    signature = list(signature_of(tables[name]))
    alias = shape.table.alias_or_name
    kinds = dict(signature)
    items = [(out, node.copy()) for out, node in shape.items]
    where = shape.where.copy() if shape.where is not None else None
    parsed: dict[str, str] = {}
    if zone is None:
        items = [(out, _time_parsed(node, alias, kinds, parsed)) for out, node in items]
        where = _time_parsed(where, alias, kinds, parsed) if where is not None else None
    time_parsed = list(parsed.items())
    stage_signature = [*signature, *((col, "TIMESTAMP") for _, col in time_parsed)]
    interval = _readable(where, zone, now_ms) if tables[name]["type"] == "table" else ETERNITY
    plain = where is None and all(_bare(node, alias) for _, node in items)
    if plain:
        renames = [(out, node.name) for out, node in items]
        sql = duckdb_sql(_select(items, None, alias, with_row=False), {INPUT: stage_signature}, zone)
        columns = result_columns(sql, {INPUT: stage_signature})
        return RowPlan(name, signature, time_parsed, None, renames, columns, interval)
    with_row = [*stage_signature, (ROW, "LONG")]
    sql = duckdb_sql(_select(items, where, alias, with_row=True), {INPUT: with_row}, zone)
    columns = result_columns(sql, {INPUT: with_row})
    sql = stored_as_written(sql, columns, keep=(ROW,))
    return RowPlan(name, signature, time_parsed, sql, [], [c for c in columns if c.name != ROW], interval)


def _bare(node: exp.Expr, alias: str) -> bool:
    return isinstance(node, exp.Column) and node.table in (alias, "")


def _select(
    items: list[tuple[str, exp.Expr]], where: exp.Expr | None, alias: str, *, with_row: bool
) -> exp.Select:
    table = exp.Table(this=exp.to_identifier(INPUT, quoted=True),
                      alias=exp.TableAlias(this=exp.to_identifier(alias, quoted=True)))  # fmt: skip
    select = exp.Select(expressions=[exp.alias_(node, out, quoted=True) for out, node in items]).from_(table)
    if with_row:
        select = select.select(exp.column(ROW, table=alias, quoted=True))
    return select.where(where) if where is not None else select


def _time_parsed(node: exp.Expr, alias: str, kinds: Mapping[str, str], parsed: dict[str, str]) -> exp.Expr:
    """`node` with each `TIME_PARSE(text column)` replaced by the column the stage parses it into."""

    def swap(n: exp.Expr) -> exp.Expr:
        if druid_name(n) != "TIME_PARSE" or not isinstance(n, exp.Anonymous) or len(n.expressions) != 1:
            return n
        arg = n.expressions[0]
        if not isinstance(arg, exp.Column) or arg.table not in (alias, "") or kinds.get(arg.name) != "STRING":
            return n
        target = parsed.setdefault(arg.name, f"__time_parsed_{len(parsed)}")
        return exp.column(target, table=alias, quoted=True)

    return node.transform(swap)


def _readable(where: exp.Expr | None, zone: str | None, now_ms: int) -> Interval:
    """The span of time the WHERE can keep rows of (its conditions on `__time`), to read no more."""
    if where is None:
        return ETERNITY
    plain = where.copy()
    for column in plain.find_all(exp.Column):
        column.set("table", None)
    try:
        with time_zone(zone):
            intervals, _ = split_time(plain, now_ms)
    except (QueryError, ValueError):  # a condition the interval reader does not take: read everything
        return ETERNITY
    spans = [Interval.parse(text) for text in intervals]
    if not spans:
        return ETERNITY
    start, end = min(s.start for s in spans), max(s.end for s in spans)
    return Interval(start, end) if end > start else ETERNITY
