"""count, and the typed sum / min / max aggregators (long, double, float).

Null handling is Druid's SQL-compatible mode: a sum, min or max over no non-null value is null;
count counts rows and is 0 for an empty bucket.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from strata.query.aggregators.base import (
    ARROW_TYPE,
    SQL_TYPE,
    Aggregator,
    agg_name,
    aggregator_type,
    aliased,
    as_array,
    field_name,
    filtered,
    numeric_input,
)
from strata.query.duck import quote_ident


@dataclass(frozen=True)
class CountAggregator(Aggregator):
    type_name = "count"
    name: str

    def columns(self) -> set[str]:
        return set()

    def intermediate_fields(self, col: str) -> list[pa.Field]:
        return [pa.field(col, pa.int64())]

    def partial_sql(self, col: str, types: Mapping[str, str], cond: str | None) -> list[str]:
        return [aliased(filtered("count(*)", cond), col)]

    def merge_sql(self, col: str) -> list[str]:
        return [aliased(f"CAST(sum({quote_ident(col)}) AS BIGINT)", col)]

    def merge_arrow(self) -> str | None:
        return "sum"

    def finalize(self, table: pa.Table, col: str) -> pa.Array:
        values = as_array(table.column(col))
        return pc.fill_null(values, 0) if values.null_count else values

    def raw(self, table: pa.Table, col: str) -> pa.Array:
        return self.finalize(table, col)

    def to_json(self) -> dict[str, Any]:
        return {"type": "count", "name": self.name}


@aggregator_type("count")
def _count(obj: Mapping[str, Any]) -> Aggregator:
    return CountAggregator(agg_name(obj, "count"))


@dataclass(frozen=True)
class NumericAggregator(Aggregator):
    """`<kind><Op>`: kind in long/double/float, op in Sum/Min/Max."""

    type_name = "numeric"
    name: str
    field: str
    kind: str  # long | double | float
    op: str  # sum | min | max

    def columns(self) -> set[str]:
        return {self.field}

    def intermediate_fields(self, col: str) -> list[pa.Field]:
        # float sums accumulate as double and round to float when finalized
        t = pa.float64() if self.kind == "float" and self.op == "sum" else ARROW_TYPE[self.kind]
        return [pa.field(col, t)]

    def _sql_type(self) -> str:
        return "DOUBLE" if self.kind == "float" and self.op == "sum" else SQL_TYPE[self.kind]

    def partial_sql(self, col: str, types: Mapping[str, str], cond: str | None) -> list[str]:
        value = numeric_input(self.field, types, "double" if self._sql_type() == "DOUBLE" else self.kind)
        return [aliased(f"CAST({filtered(f'{self.op}({value})', cond)} AS {self._sql_type()})", col)]

    def merge_sql(self, col: str) -> list[str]:
        return [aliased(f"CAST({self.op}({quote_ident(col)}) AS {self._sql_type()})", col)]

    def merge_arrow(self) -> str | None:
        return self.op

    def finalize(self, table: pa.Table, col: str) -> pa.Array:
        values = as_array(table.column(col))
        return values.cast(pa.float32()) if self.kind == "float" else values

    def raw(self, table: pa.Table, col: str) -> pa.Array:
        return self.finalize(table, col)

    def to_json(self) -> dict[str, Any]:
        return {"type": f"{self.kind}{self.op.capitalize()}", "name": self.name, "fieldName": self.field}


def _numeric_parser(kind: str, op: str) -> None:
    type_name = f"{kind}{op.capitalize()}"

    @aggregator_type(type_name)
    def parse(obj: Mapping[str, Any]) -> Aggregator:
        name = agg_name(obj, type_name)
        return NumericAggregator(name, field_name(obj, type_name, name), kind, op)


for _kind in ("long", "double", "float"):
    for _op in ("sum", "min", "max"):
        _numeric_parser(_kind, _op)
