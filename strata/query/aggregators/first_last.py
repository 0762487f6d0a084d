"""`<kind>First` / `<kind>Last`: the value at the earliest / latest row time.

The intermediate is the pair (value, time) so partials merge by comparing times. As Druid's
numeric first/last in SQL-compatible mode, the value at the extreme time is taken even when it is
null. `stringFirst/Last` truncate to `maxStringBytes` (counted in characters here). Among rows of
the same time the first aggregators keep the first row read and the last ones the last
(`time < firstTime`, `time >= lastTime` in Druid's aggregators): the elements unnested from one row
share its time, and `latest` of them is the row's last element.
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
from strata.query.columns import ELEMENT_POSITION, TIME_COLUMN
from strata.query.duck import quote_ident
from strata.query.fields import get_int, get_str

DEFAULT_MAX_STRING_BYTES = 1024


@dataclass(frozen=True)
class FirstLastAggregator(Aggregator):
    type_name = "firstLast"
    name: str
    field: str
    kind: str  # long | double | float | string
    last: bool
    time_column: str = TIME_COLUMN
    max_string_bytes: int = DEFAULT_MAX_STRING_BYTES

    def columns(self) -> set[str]:
        return {self.field, self.time_column}

    def reads_element_positions(self) -> bool:
        return self.last

    def _sql_type(self) -> str:
        return "VARCHAR" if self.kind == "string" else SQL_TYPE[self.kind]

    def intermediate_fields(self, col: str) -> list[pa.Field]:
        value_type = pa.string() if self.kind == "string" else ARROW_TYPE[self.kind]
        return [pa.field(col, value_type), pa.field(f"{col}_t", pa.int64())]

    def _pick(self) -> tuple[str, str]:
        return ("arg_max_null", "max") if self.last else ("arg_min_null", "min")

    def partial_sql(self, col: str, types: Mapping[str, str], cond: str | None) -> list[str]:
        if self.kind == "string":
            value = f"CAST({quote_ident(self.field)} AS VARCHAR)"
        else:
            value = numeric_input(self.field, types, self.kind)
        time = quote_ident(self.time_column)
        if types.get(self.time_column, "BIGINT") != "BIGINT":
            time = f"TRY_CAST({time} AS BIGINT)"
        pick, extreme = self._pick()
        key = time
        if self.last and ELEMENT_POSITION in types:  # the last element read among one time's rows
            key = f"if({time} IS NULL, NULL, {{'t': {time}, 'p': {quote_ident(ELEMENT_POSITION)}}})"
        return [
            aliased(f"CAST({filtered(f'{pick}({value}, {key})', cond)} AS {self._sql_type()})", col),
            aliased(filtered(f"{extreme}({time})", cond), f"{col}_t"),
        ]

    def merge_sql(self, col: str) -> list[str]:
        pick, extreme = self._pick()
        value, time = quote_ident(col), quote_ident(f"{col}_t")
        return [
            aliased(f"CAST({pick}({value}, {time}) AS {self._sql_type()})", col),
            aliased(f"{extreme}({time})", f"{col}_t"),
        ]

    def finalize(self, table: pa.Table, col: str) -> pa.Array:
        values = as_array(table.column(col))
        if self.kind == "string":
            return pc.utf8_slice_codeunits(values, 0, self.max_string_bytes)
        return values

    def raw(self, table: pa.Table, col: str) -> pa.Array:
        return self.finalize(table, col)

    def unfinalized_json(self, table: pa.Table, col: str) -> list[Any]:
        from strata.query.aggregators.base import json_values

        values = json_values(self.finalize(table, col))
        times = table.column(f"{col}_t").to_pylist()
        return [{"lhs": t, "rhs": v} for t, v in zip(times, values, strict=True)]

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "type": f"{self.kind}{'Last' if self.last else 'First'}",
            "name": self.name,
            "fieldName": self.field,
            "timeColumn": self.time_column,
        }
        if self.kind == "string":
            out["maxStringBytes"] = self.max_string_bytes
        return out


def _first_last_parser(kind: str, last: bool) -> None:
    type_name = f"{kind}{'Last' if last else 'First'}"

    @aggregator_type(type_name)
    def parse(obj: Mapping[str, Any]) -> Aggregator:
        name = agg_name(obj, type_name)
        what = f"aggregator [{name}]"
        return FirstLastAggregator(
            name,
            field_name(obj, type_name, name),
            kind,
            last,
            time_column=get_str(obj, "timeColumn", TIME_COLUMN, what=what),
            max_string_bytes=get_int(obj, "maxStringBytes", DEFAULT_MAX_STRING_BYTES, what=what, minimum=1),
        )


for _kind in ("long", "double", "float", "string"):
    for _last in (False, True):
        _first_last_parser(_kind, _last)
