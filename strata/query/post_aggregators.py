"""Druid's post-aggregators, evaluated column-wise over merged results (pyarrow compute).

A post-aggregator reads aggregator values (raw for `fieldAccess`, finalized for
`finalizingFieldAccess`) and earlier post-aggregators by name, and yields one value per result
row. Nulls propagate as in Druid's SQL-compatible mode; arithmetic is always floating point and
`/` returns 0 when dividing by 0 (`quotient` divides plainly). `expression` post-aggregators run
Druid's expression language over the finalized values with the same engine as virtual columns.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pyarrow as pa
import pyarrow.compute as pc

from strata.query.duck import connection, quote_ident
from strata.query.errors import QueryUnsupported, invalid
from strata.query.expressions.duck import compile_expression
from strata.query.expressions.parser import Node, identifiers, parse_expression
from strata.query.expressions.typed import DOUBLE, LONG, STRING, cast_to
from strata.query.fields import as_object, get_bool, get_list, get_str
from strata.query.sketch_functions import estimates


@dataclass
class PostAggEnv:
    """Values visible to post-aggregators: raw (unfinalized) and finalized, by name."""

    length: int
    raw: dict[str, pa.Array] = field(default_factory=dict)
    final: dict[str, pa.Array] = field(default_factory=dict)


class PostAggregator(ABC):
    type_name: ClassVar[str]
    name: str

    @abstractmethod
    def compute(self, env: PostAggEnv) -> pa.Array: ...

    @abstractmethod
    def dependencies(self) -> set[str]: ...

    @abstractmethod
    def to_json(self) -> dict[str, Any]: ...


def as_double(arr: pa.Array) -> pa.Array:
    """A numeric view of any value column (sketches read as their estimate)."""
    if pa.types.is_binary(arr.type) or pa.types.is_large_binary(arr.type):
        return estimates(arr)
    if pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type):
        return pa.array([_to_float(v) for v in arr.to_pylist()], pa.float64())
    return pc.cast(arr, pa.float64())


def _to_float(v: str | None) -> float | None:
    try:
        return None if v is None else float(v)
    except ValueError:
        return None


@dataclass(frozen=True)
class FieldAccess(PostAggregator):
    type_name = "fieldAccess"
    name: str
    field_name: str
    finalizing: bool = False

    def compute(self, env: PostAggEnv) -> pa.Array:
        source = env.final if self.finalizing else env.raw
        return source[self.field_name]

    def dependencies(self) -> set[str]:
        return {self.field_name}

    def to_json(self) -> dict[str, Any]:
        kind = "finalizingFieldAccess" if self.finalizing else "fieldAccess"
        return {"type": kind, "name": self.name, "fieldName": self.field_name}


@dataclass(frozen=True)
class Constant(PostAggregator):
    type_name = "constant"
    name: str
    value: int | float

    def compute(self, env: PostAggEnv) -> pa.Array:
        t = pa.int64() if isinstance(self.value, int) else pa.float64()
        return pa.array([self.value] * env.length, t)

    def dependencies(self) -> set[str]:
        return set()

    def to_json(self) -> dict[str, Any]:
        return {"type": "constant", "name": self.name, "value": self.value}


def _safe_divide(a: pa.Array, b: pa.Array) -> pa.Array:
    """Druid's `/`: a null operand gives null (checked first), then a zero divisor gives 0."""
    zero = pc.equal(b, 0.0)
    quotient = pc.divide(a, pc.if_else(zero, pa.scalar(1.0), b))
    return pc.if_else(pc.and_(zero, pc.is_valid(a)), pa.scalar(0.0), quotient)


_OPS: dict[str, Callable[[pa.Array, pa.Array], pa.Array]] = {
    "+": pc.add,
    "-": pc.subtract,
    "*": pc.multiply,
    "/": _safe_divide,
    "quotient": pc.divide,
    "pow": pc.power,
}


@dataclass(frozen=True)
class Arithmetic(PostAggregator):
    type_name = "arithmetic"
    name: str
    fn: str
    fields: tuple[PostAggregator, ...]
    ordering: str | None = None

    def compute(self, env: PostAggEnv) -> pa.Array:
        op = _OPS[self.fn]
        result = as_double(self.fields[0].compute(env))
        for f in self.fields[1:]:
            result = op(result, as_double(f.compute(env)))
        return result

    def dependencies(self) -> set[str]:
        return set().union(*(f.dependencies() for f in self.fields))

    def to_json(self) -> dict[str, Any]:
        return {
            "type": "arithmetic",
            "name": self.name,
            "fn": self.fn,
            "fields": [f.to_json() for f in self.fields],
            "ordering": self.ordering,
        }


@dataclass(frozen=True)
class GreatestLeast(PostAggregator):
    type_name = "greatestLeast"
    name: str
    kind: str  # double | long
    greatest: bool
    fields: tuple[PostAggregator, ...]

    def compute(self, env: PostAggEnv) -> pa.Array:
        values = [as_double(f.compute(env)) for f in self.fields]
        pick = pc.max_element_wise if self.greatest else pc.min_element_wise
        result = pick(*values, skip_nulls=True) if len(values) > 1 else values[0]
        return pc.cast(pc.trunc(result), pa.int64()) if self.kind == "long" else result

    def dependencies(self) -> set[str]:
        return set().union(*(f.dependencies() for f in self.fields))

    def to_json(self) -> dict[str, Any]:
        kind = f"{self.kind}{'Greatest' if self.greatest else 'Least'}"
        return {"type": kind, "name": self.name, "fields": [f.to_json() for f in self.fields]}


@dataclass(frozen=True)
class SketchEstimate(PostAggregator):
    """`HLLSketchEstimate` (over a post-aggregator) and `hyperUniqueCardinality` (over a name)."""

    type_name = "HLLSketchEstimate"
    name: str
    field: PostAggregator
    round: bool = False
    legacy: bool = False  # hyperUniqueCardinality

    def compute(self, env: PostAggEnv) -> pa.Array:
        values = as_double(self.field.compute(env))
        return pc.cast(pc.floor(pc.add(values, 0.5)), pa.int64()) if self.round else values

    def dependencies(self) -> set[str]:
        return self.field.dependencies()

    def to_json(self) -> dict[str, Any]:
        if self.legacy and isinstance(self.field, FieldAccess):
            return {"type": "hyperUniqueCardinality", "name": self.name, "fieldName": self.field.field_name}
        return {
            "type": "HLLSketchEstimate",
            "name": self.name,
            "field": self.field.to_json(),
            "round": self.round,
        }


# -- expression -----------------------------------------------------------------------------------
_EXPRESSION_KINDS = {"LONG": LONG, "DOUBLE": DOUBLE, "FLOAT": DOUBLE, "STRING": STRING}


def _value_duck_type(t: pa.DataType) -> str:
    if pa.types.is_integer(t) or pa.types.is_boolean(t):
        return "BIGINT"
    if pa.types.is_floating(t) or pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return "DOUBLE"
    return "VARCHAR"


@dataclass(frozen=True)
class ExpressionPost(PostAggregator):
    type_name = "expression"
    name: str
    expression: str
    tree: Node
    output_type: str | None = None

    def compute(self, env: PostAggEnv) -> pa.Array:
        columns: dict[str, pa.Array] = {}
        for ident in sorted(identifiers(self.tree)):
            source = env.final.get(ident, env.raw.get(ident))
            if source is None:
                continue  # an unknown name reads as null, as a missing column does
            if pa.types.is_binary(source.type) or pa.types.is_large_binary(source.type):
                source = estimates(source)  # sketches read as their estimate
            columns[ident] = source
        typed = compile_expression(self.tree, {n: _value_duck_type(a.type) for n, a in columns.items()})
        if self.output_type is not None:
            typed = cast_to(typed, _EXPRESSION_KINDS[self.output_type])
        table = pa.table(columns) if columns else pa.table({"__row": pa.nulls(env.length, pa.int8())})
        conn = connection()
        name = "__post_agg_input"
        conn.register(name, table)
        try:
            result = conn.sql(f"SELECT {typed.sql} AS {quote_ident('v')} FROM {name}").to_arrow_table()
        finally:
            conn.unregister(name)
        column = result.column(0)
        return column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column

    def dependencies(self) -> set[str]:
        return set()  # names the expression does not find read as null, as in Druid

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "expression", "name": self.name, "expression": self.expression}
        if self.output_type is not None:
            out["outputType"] = self.output_type
        return out


def parse_expression_post(name: str, obj: Any) -> ExpressionPost:
    text = obj.get("expression")
    if not isinstance(text, str):
        raise invalid("Missing required field [expression] of postAggregator [%s]", name)
    output = obj.get("outputType")
    if output is not None and (not isinstance(output, str) or output.upper() not in _EXPRESSION_KINDS):
        raise invalid("Field [outputType] of postAggregator [%s] must be LONG, FLOAT, DOUBLE or STRING", name)
    tree = parse_expression(text)
    compile_expression(tree, {})  # functions and literal arguments checked up front
    return ExpressionPost(name, text, tree, output.upper() if output else None)


# -- parsing -------------------------------------------------------------------------------------
def parse_post_aggregator(obj: Any, nested: bool = False) -> PostAggregator:
    """One post-aggregator; as in Druid, those nested in another's fields may go without a name."""
    obj = as_object(obj, "postAggregator")
    kind = obj.get("type")
    name = obj.get("name")
    what = f"postAggregator [{name}]"
    if kind in ("fieldAccess", "finalizingFieldAccess"):
        fname = get_str(obj, "fieldName", what=what)
        return FieldAccess(name if isinstance(name, str) else fname, fname, kind == "finalizingFieldAccess")
    if nested and name is None:
        name = f"<{kind}>"
    if not isinstance(name, str) or not name:
        raise invalid("Missing required field [name] of postAggregator (type %s)", kind)
    if kind == "constant":
        value = obj.get("value")
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise invalid("Field [value] of %s must be a number", what)
        return Constant(name, value)
    if kind == "arithmetic":
        fn = get_str(obj, "fn", what=what)
        if fn not in _OPS:
            raise invalid("Unknown arithmetic fn [%s] of %s; expected one of %s", fn, what, ", ".join(_OPS))
        fields = _fields(obj, what, minimum=2)
        ordering = obj.get("ordering")
        if ordering not in (None, "numericFirst"):
            raise invalid("Field [ordering] of %s must be null or numericFirst", what)
        return Arithmetic(name, fn, fields, ordering)
    if kind in ("doubleGreatest", "doubleLeast", "longGreatest", "longLeast"):
        greatest = kind.endswith("Greatest")
        return GreatestLeast(
            name, kind.removesuffix("Greatest").removesuffix("Least"), greatest, _fields(obj, what, minimum=1)
        )
    if kind == "HLLSketchEstimate":
        inner = parse_post_aggregator(as_object(obj.get("field"), f"field of {what}"), nested=True)
        return SketchEstimate(name, inner, get_bool(obj, "round", False, what=what))
    if kind == "hyperUniqueCardinality":
        fname = get_str(obj, "fieldName", what=what)
        return SketchEstimate(name, FieldAccess(fname, fname), legacy=True)
    if kind == "expression":
        return parse_expression_post(name, obj)
    if kind in (
        "javascript",
        "thetaSketchEstimate",
        "thetaSketchSetOp",
        "HLLSketchUnion",
        "HLLSketchToString",
        "quantilesDoublesSketchToQuantile",
    ):
        raise QueryUnsupported(f"Post-aggregator type [{kind}] is not supported")
    raise invalid("Unknown postAggregator type [%s]", kind)


def _fields(obj: Mapping[str, Any], what: str, minimum: int) -> tuple[PostAggregator, ...]:
    raw = get_list(obj, "fields", what=what)
    if len(raw) < minimum:
        raise invalid("Field [fields] of %s needs at least %d entries, got %d", what, minimum, len(raw))
    return tuple(parse_post_aggregator(f, nested=True) for f in raw)


def parse_post_aggregators(obj: Mapping[str, Any], known: Sequence[str]) -> tuple[PostAggregator, ...]:
    """A query's `postAggregations`, checked against the names defined before each one."""
    posts = tuple(parse_post_aggregator(p) for p in get_list(obj, "postAggregations", []))
    defined = set(known)
    for p in posts:
        missing = p.dependencies() - defined
        if missing:
            raise invalid("Missing fields [%s] for postAggregator [%s]", ", ".join(sorted(missing)), p.name)
        if p.name in defined:
            raise invalid("[%s] already defined", p.name)
        defined.add(p.name)
    return posts


def compute_all(posts: Sequence[PostAggregator], env: PostAggEnv) -> dict[str, pa.Array]:
    """Each post-aggregator's column, in order (later ones may read earlier ones)."""
    out: dict[str, pa.Array] = {}
    for p in posts:
        value = p.compute(env)
        if isinstance(value, pa.ChunkedArray):
            value = value.combine_chunks()
        out[p.name] = value
        env.raw[p.name] = value
        env.final[p.name] = value
    return out
