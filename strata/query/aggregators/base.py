"""The aggregator model: how one Druid aggregator becomes SQL, merges, and finalizes.

An aggregator turns rows into one or more *intermediate* columns per group (a sum, a min, a value
with its time, a serialized sketch). Intermediates merge associatively with `merge_sql`, so
partials from any mix of segments combine in one vectorised DuckDB pass over Arrow. `finalize`
maps merged intermediates to what Druid prints (sketch -> estimate, empty count -> 0).

Intermediate column names are given by the caller (`col`, plus suffixes), never the user's
aggregator name, so names with quotes or clashing with dimensions need no care in SQL.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import pyarrow as pa
import pyarrow.compute as pc

from strata.query.duck import quote_ident
from strata.query.errors import QueryUnsupported, invalid
from strata.query.fields import as_object, get_str
from strata.query.java_text import jackson_double

SQL_TYPE = {"long": "BIGINT", "double": "DOUBLE", "float": "FLOAT"}
ARROW_TYPE = {"long": pa.int64(), "double": pa.float64(), "float": pa.float32()}


class Aggregator(ABC):
    type_name: ClassVar[str]
    name: str

    @abstractmethod
    def columns(self) -> set[str]:
        """Input columns read from the segment rows."""

    def reads_element_positions(self) -> bool:
        """Whether ties among rows of one time are broken by an unnested element's position (a
        `*Last` aggregator's): only then does an unnest carry the position, which costs a list a row."""
        return False

    def split_invariant(self) -> bool:
        """Whether grouping all rows at once gives exactly what merging per-segment partials gives.

        False for sketches: an HLL union's estimate depends on how the rows were split, so a
        data node answering directly keeps the per-segment path and agrees with a broker's answer.
        """
        return True

    @abstractmethod
    def intermediate_fields(self, col: str) -> list[pa.Field]:
        """Names and Arrow types of the intermediate columns, the first named `col`."""

    @abstractmethod
    def partial_sql(self, col: str, types: Mapping[str, str], cond: str | None) -> list[str]:
        """`expr AS name` aggregate expressions over rows (only rows where `cond` holds)."""

    def merge_arrow(self) -> str | None:
        """The Arrow hash-aggregate function that merges this aggregator's single intermediate
        column, if one does (DuckDB's ~1 ms per statement dominates merging a few small partials)."""
        return None

    @abstractmethod
    def merge_sql(self, col: str) -> list[str]:
        """`expr AS name` aggregate expressions combining intermediate columns."""

    @abstractmethod
    def to_json(self) -> dict[str, Any]:
        """Canonical JSON (defaults spelled out) for cache keys and forwarding."""

    def finalize(self, table: pa.Table, col: str) -> pa.Array:
        """The finalized value per row of a merged table."""
        return _array(table.column(col))

    def raw(self, table: pa.Table, col: str) -> pa.Array:
        """The value `fieldAccess` post-aggregators see (unfinalized, but a plain value)."""
        return _array(table.column(col))

    def unfinalized_json(self, table: pa.Table, col: str) -> list[Any]:
        """What Druid prints with context `finalize: false`."""
        return json_values(self.raw(table, col))

    def names(self, col: str) -> list[str]:
        return [f.name for f in self.intermediate_fields(col)]


def _array(column: pa.ChunkedArray | pa.Array) -> pa.Array:
    if isinstance(column, pa.ChunkedArray):
        return column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    return column


def as_array(column: pa.ChunkedArray | pa.Array) -> pa.Array:
    return _array(column)


def aliased(expr: str, name: str) -> str:
    return f"{expr} AS {quote_ident(name)}"


def filtered(expr_head: str, cond: str | None) -> str:
    """An aggregate call restricted to rows where `cond` holds."""
    return expr_head if cond is None else f"{expr_head} FILTER (WHERE {cond})"


def numeric_input(column: str, types: Mapping[str, str], kind: str) -> str:
    """Per-row value of `column` read as Druid reads it for a long/double/float aggregator.

    Longs from floating columns truncate toward zero (Java's cast), strings parse or become null.
    """
    ident = quote_ident(column)
    source = types.get(column, "VARCHAR")
    if source == "VARCHAR":
        ident, source = f"TRY_CAST({ident} AS DOUBLE)", "DOUBLE"
    elif source == "BOOLEAN":
        ident, source = f"CAST({ident} AS BIGINT)", "BIGINT"
    elif source == "BLOB":
        raise invalid("Column [%s] holds sketches and cannot feed a numeric aggregator", column)
    if kind == "long" and source in ("DOUBLE", "FLOAT"):
        return f"CAST(trunc({ident}) AS BIGINT)"
    target = SQL_TYPE[kind]
    return ident if source == target else f"CAST({ident} AS {target})"


def json_values(arr: pa.Array | pa.ChunkedArray) -> list[Any]:
    """Python values as Druid prints them (floats with their shortest float32 spelling)."""
    arr = _array(arr)
    values: list[Any] = arr.to_pylist()
    if pa.types.is_float32(arr.type):
        return [None if v is None else jackson_double(float(str(_f32(v)))) for v in values]
    if pa.types.is_binary(arr.type) or pa.types.is_large_binary(arr.type):
        import base64

        return [None if v is None else base64.b64encode(v).decode() for v in values]
    return non_finite_as_text(arr, values)


def non_finite_as_text(arr: pa.Array | pa.ChunkedArray, values: list[Any]) -> list[Any]:
    """`values`, the Python values of `arr`, with its NaN and infinities spelled as Druid's JSON
    writer spells them (`jackson_double`); the same list when `arr` holds none (one Arrow pass)."""
    if not pa.types.is_floating(arr.type) or pc.all(pc.is_finite(arr)).as_py() is not False:
        return values
    return [None if v is None else jackson_double(v) for v in values]


def _f32(v: float) -> Any:
    import numpy as np

    return np.float32(v)


# -- registry ------------------------------------------------------------------------------------
Parser = Callable[[Mapping[str, Any]], Aggregator]
# Filled by each aggregator module as it is imported (the package's __init__ imports them all).
_PARSERS: dict[str, Parser] = {}
UNSUPPORTED = frozenset(
    {
        "javascript",
        "hyperUnique",
        "thetaSketch",
        "quantilesDoublesSketch",
        "HLLSketch",
        "doubleMean",
        "longAny",
        "doubleAny",
        "floatAny",
        "stringAny",
        "histogram",
        "approxHistogram",
        "approxHistogramFold",
        "fixedBucketsHistogram",
        "arrayOfDoublesSketch",
        "grouping",
        "expression",
    }
)


def aggregator_type(*names: str) -> Callable[[Parser], Parser]:
    def register(parser: Parser) -> Parser:
        for n in names:
            _PARSERS[n] = parser
        return parser

    return register


def parse_aggregator(obj: Any) -> Aggregator:
    obj = as_object(obj, "aggregator")
    kind = obj.get("type")
    if not isinstance(kind, str):
        raise invalid("Missing required field [type] of aggregator")
    parser = _PARSERS.get(kind)
    if parser is None:
        if kind in UNSUPPORTED:
            raise QueryUnsupported(f"Aggregator type [{kind}] is not supported")
        raise invalid("Unknown aggregator type [%s]; known types: %s", kind, ", ".join(sorted(_PARSERS)))
    return parser(obj)


def agg_name(obj: Mapping[str, Any], kind: str) -> str:
    name = get_str(obj, "name", what=f"aggregator [{kind}]")
    if not name:
        raise invalid("Field [name] of aggregator [%s] must not be empty", kind)
    return name


def field_name(obj: Mapping[str, Any], kind: str, name: str) -> str:
    """The column an aggregator reads; an `expression` input reads an implicit virtual column."""
    expression = obj.get("expression")
    if expression is not None:
        if obj.get("fieldName") is not None:
            raise invalid("Aggregator [%s] takes [fieldName] or [expression], not both", name)
        if not isinstance(expression, str):
            raise invalid("Field [expression] of aggregator [%s] must be a string", name)
        from strata.query.virtual_columns import expression_column

        return expression_column(expression)
    value = get_str(obj, "fieldName", None, what=f"aggregator [{name}]")
    if not value:
        raise invalid("Missing required field [fieldName] of aggregator [%s] (type %s)", name, kind)
    return str(value)
