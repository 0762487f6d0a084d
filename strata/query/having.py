"""groupBy `having`: predicates over finalized result rows, evaluated column-wise.

Comparisons against a null value are false (SQL-compatible nulls). The `filter` having spec runs a
Druid filter over the result rows (columns named by output names, `__time` the row time) with the
same DuckDB rendering filters use on segment rows.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from strata.query.errors import QueryUnsupported, invalid
from strata.query.fields import as_object, get_float, get_list, get_str
from strata.query.filters import Filter, parse_filter

Columns = Mapping[str, pa.Array]


class Having(ABC):
    @abstractmethod
    def mask(self, columns: Columns, n: int) -> np.ndarray:
        """A boolean per row: whether it is kept."""

    @abstractmethod
    def to_json(self) -> dict[str, Any]: ...


def _bools(arr: pa.Array | pa.ChunkedArray) -> np.ndarray:
    return np.asarray(pc.fill_null(arr, False).to_numpy(zero_copy_only=False), dtype=bool)


@dataclass(frozen=True)
class Compare(Having):
    kind: str  # greaterThan | lessThan | equalTo
    aggregation: str
    value: float

    def mask(self, columns: Columns, n: int) -> np.ndarray:
        if self.aggregation not in columns:
            return np.zeros(n, dtype=bool)
        from strata.query.post_aggregators import as_double

        values = as_double(columns[self.aggregation])
        op = {"greaterThan": pc.greater, "lessThan": pc.less, "equalTo": pc.equal}[self.kind]
        return _bools(op(values, self.value))

    def to_json(self) -> dict[str, Any]:
        return {"type": self.kind, "aggregation": self.aggregation, "value": self.value}


@dataclass(frozen=True)
class DimSelector(Having):
    dimension: str
    value: str | None

    def mask(self, columns: Columns, n: int) -> np.ndarray:
        if self.dimension not in columns:
            return np.full(n, self.value is None)
        values = pc.cast(columns[self.dimension], pa.string())
        if self.value is None:
            return _bools(values.is_null())
        return _bools(pc.equal(values, self.value))

    def to_json(self) -> dict[str, Any]:
        return {"type": "dimSelector", "dimension": self.dimension, "value": self.value}


@dataclass(frozen=True)
class Logical(Having):
    kind: str  # and | or | not
    specs: tuple[Having, ...]

    def mask(self, columns: Columns, n: int) -> np.ndarray:
        masks = [s.mask(columns, n) for s in self.specs]
        if self.kind == "not":
            return ~masks[0]
        if self.kind == "and":
            return np.logical_and.reduce(masks) if masks else np.ones(n, dtype=bool)
        return np.logical_or.reduce(masks) if masks else np.zeros(n, dtype=bool)

    def to_json(self) -> dict[str, Any]:
        if self.kind == "not":
            return {"type": "not", "havingSpec": self.specs[0].to_json()}
        return {"type": self.kind, "havingSpecs": [s.to_json() for s in self.specs]}


@dataclass(frozen=True)
class Constant(Having):
    keep: bool

    def mask(self, columns: Columns, n: int) -> np.ndarray:
        return np.full(n, self.keep)

    def to_json(self) -> dict[str, Any]:
        return {"type": "always" if self.keep else "never"}


@dataclass(frozen=True)
class FilterHaving(Having):
    filter: Filter

    def mask(self, columns: Columns, n: int) -> np.ndarray:
        from strata.query.duck import connection, duck_type, query_arrow

        table = pa.table(dict(columns)) if columns else pa.table({"__row": pa.nulls(n, pa.int64())})
        types = {name: duck_type(table.schema.field(name).type) for name in table.column_names}
        for col in self.filter.columns():
            types.setdefault(col, "VARCHAR")
        missing = [c for c in self.filter.columns() if c not in table.column_names]
        for c in missing:
            table = table.append_column(c, pa.nulls(n, pa.string()))
        sql = f"SELECT ({self.filter.to_sql(types)}) AS keep FROM r"
        result = query_arrow(connection(), table, "r", sql)
        return _bools(result.column("keep"))

    def to_json(self) -> dict[str, Any]:
        return {"type": "filter", "filter": self.filter.to_json()}


def parse_having(value: Any) -> Having | None:
    if value is None:
        return None
    obj = as_object(value, "having")
    kind = obj.get("type")
    what = f"having [{kind}]"
    if kind in ("greaterThan", "lessThan", "equalTo"):
        return Compare(kind, get_str(obj, "aggregation", what=what), get_float(obj, "value", what=what))
    if kind == "dimSelector":
        if obj.get("extractionFn") is not None:
            raise QueryUnsupported("extractionFn in having [dimSelector] is not supported")
        raw = obj.get("value")
        return DimSelector(get_str(obj, "dimension", what=what), None if raw is None else str(raw))
    if kind in ("and", "or"):
        return Logical(kind, tuple(_required(s) for s in get_list(obj, "havingSpecs", what=what)))
    if kind == "not":
        return Logical("not", (_required(obj.get("havingSpec")),))
    if kind in ("always", "never"):
        return Constant(kind == "always")
    if kind == "filter":
        flt = parse_filter(obj.get("filter"))
        if flt is None:
            raise invalid("Missing required field [filter] of having [filter]")
        return FilterHaving(flt)
    raise invalid("Unknown having type [%s]", kind)


def _required(value: Any) -> Having:
    spec = parse_having(value)
    if spec is None:
        raise invalid("Missing having spec")
    return spec
