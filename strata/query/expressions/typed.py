"""Typed SQL fragments of Druid expressions and Druid's conversions between their types.

Druid types: LONG, DOUBLE, STRING, ARRAY<LONG|DOUBLE|STRING>, COMPLEX<json> (and arrays of it,
what `json_query_array` gives), and NULL for an untyped null literal. Strings read as numbers (for
arithmetic) parse or become null; numbers cast to LONG truncate toward zero; a string is true when
it reads `true` (Java's Boolean.parseBoolean), a number when it is not zero. A scalar cast to an
array is the array of that one value; an array cast to a scalar is its one value (null unless it
has exactly one).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from strata.query.duck import MULTI_VALUE, quote_str
from strata.query.errors import invalid
from strata.query.expressions.parser import Node

LONG, DOUBLE, STRING, NULL = "LONG", "DOUBLE", "STRING", "NULL"
JSON = "COMPLEX<json>"
ARRAY_LONG, ARRAY_DOUBLE, ARRAY_STRING, ARRAY_JSON = (
    "ARRAY<LONG>",
    "ARRAY<DOUBLE>",
    "ARRAY<STRING>",
    "ARRAY<COMPLEX<json>>",
)
# a type as a query names it (a cast's target, a virtual column's outputType; upper case) -> its kind
NAMED_KINDS = {
    "LONG": LONG,
    "DOUBLE": DOUBLE,
    "FLOAT": DOUBLE,
    "STRING": STRING,
    "ARRAY<LONG>": ARRAY_LONG,
    "ARRAY<DOUBLE>": ARRAY_DOUBLE,
    "ARRAY<STRING>": ARRAY_STRING,
    "COMPLEX<JSON>": JSON,
}
_TO_DUCK = {
    LONG: "BIGINT",
    DOUBLE: "DOUBLE",
    STRING: "VARCHAR",
    NULL: "VARCHAR",
    JSON: "JSON",
    ARRAY_LONG: "BIGINT[]",
    ARRAY_DOUBLE: "DOUBLE[]",
    ARRAY_STRING: "VARCHAR[]",
    ARRAY_JSON: "JSON[]",
}
FROM_DUCK = {
    "BIGINT": LONG,
    "INTEGER": LONG,
    "BOOLEAN": LONG,
    "DOUBLE": DOUBLE,
    "FLOAT": DOUBLE,
    "VARCHAR": STRING,
    "JSON": JSON,
    "BIGINT[]": ARRAY_LONG,
    "INTEGER[]": ARRAY_LONG,
    "DOUBLE[]": ARRAY_DOUBLE,
    "FLOAT[]": ARRAY_DOUBLE,
    "VARCHAR[]": ARRAY_STRING,
    MULTI_VALUE: ARRAY_STRING,
    "JSON[]": ARRAY_JSON,
}


@dataclass(frozen=True, slots=True)
class Typed:
    sql: str
    kind: str  # LONG, DOUBLE, STRING, NULL, an ARRAY<...> or COMPLEX<json>
    multi: bool = False  # the values of a multi-value row (implicitly mapped), not one array

    @property
    def duck_type(self) -> str:
        if self.multi and self.kind == ARRAY_STRING:
            return MULTI_VALUE
        return _TO_DUCK[self.kind]


def duck_of(kind: str) -> str:
    """The DuckDB type of a value of Druid `kind`."""
    return _TO_DUCK[kind]


def is_array_kind(kind: str) -> bool:
    return kind.startswith("ARRAY<")


def element_kind(kind: str) -> str:
    """The kind of one element of an array kind (a scalar kind is its own element)."""
    return kind[len("ARRAY<") : -1] if is_array_kind(kind) else kind


def array_of(kind: str) -> str:
    if kind == NULL:
        return ARRAY_STRING
    return kind if is_array_kind(kind) else f"ARRAY<{kind}>"


class Scope(Protocol):
    """What a function compiler needs: a way to compile its arguments, and to compile a lambda's
    body with its parameters bound."""

    def compile(self, node: Node) -> Typed: ...

    def fresh_name(self) -> str:
        """A DuckDB lambda parameter name unused in this expression."""

    def bind(self, bindings: dict[str, Typed]) -> Scope:
        """A scope where the names in `bindings` (lambda parameters) shadow columns."""

    def reads_multi_value(self, node: Node) -> bool:
        """Whether `node` reads a multi-value string column whole (not an array column)."""


def literal(value: int | float | str | None) -> Typed:
    if value is None:
        return Typed("NULL", NULL)
    if isinstance(value, bool):
        return Typed("1" if value else "0", LONG)
    if isinstance(value, int):
        return Typed(f"CAST({value} AS BIGINT)", LONG)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            text = "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")
            return Typed(f"CAST('{text}' AS DOUBLE)", DOUBLE)
        return Typed(f"CAST({value!r} AS DOUBLE)", DOUBLE)
    return Typed(quote_str(value), STRING)


def as_double(t: Typed) -> str:
    if is_array_kind(t.kind):
        return as_double(single(t))
    if t.kind == JSON:
        return f"TRY_CAST(json_extract_string({t.sql}, '$') AS DOUBLE)"
    if t.kind == DOUBLE:
        return t.sql
    if t.kind == STRING:
        return f"TRY_CAST({t.sql} AS DOUBLE)"
    return f"CAST({t.sql} AS DOUBLE)"


def as_number(t: Typed) -> str:
    return t.sql if t.kind in (LONG, DOUBLE) else as_double(t)


def as_long(t: Typed) -> str:
    """Druid's cast to LONG: numbers truncate toward zero, strings parse as numbers first."""
    if t.kind == LONG:
        return t.sql
    if t.kind == NULL:
        return "CAST(NULL AS BIGINT)"
    if is_array_kind(t.kind):
        return as_long(single(t))
    return java_long(as_double(t))


def java_long_sum(a: str, op: str, b: str) -> str:
    """`a + b` or `a - b` of two BIGINTs as Java's longs add: past the range it wraps around (Druid
    answers 2^62 + 2^62 with Long.MIN_VALUE), where DuckDB fails the statement. The exact HUGEINT
    result's low 64 bits read as a signed number: each operand is written once, so a chain of
    sums grows linearly (a CASE naming them again made `a + b + c + ...` exponential in size)."""
    low_bits = f"((CAST({a} AS HUGEINT) {op} {b}) & CAST(18446744073709551615 AS HUGEINT))"
    sign_bit = "CAST(9223372036854775808 AS HUGEINT)"
    return f"CAST(xor({low_bits}, {sign_bit}) - {sign_bit} AS BIGINT)"


def java_long(double: str) -> str:
    """Java's `(long)` of a DOUBLE, as Druid casts one: toward zero, NaN 0, and past the range (an
    infinity) the nearest end of it, where DuckDB's cast fails."""
    return (
        f"(CASE WHEN isnan({double}) THEN CAST(0 AS BIGINT)"
        f" WHEN {double} >= 9.223372036854775807E18 THEN CAST(9223372036854775807 AS BIGINT)"
        f" WHEN {double} <= -9.223372036854775808E18 THEN CAST(-9223372036854775808 AS BIGINT)"
        f" ELSE CAST(trunc({double}) AS BIGINT) END)"
    )


def as_text(t: Typed) -> str:
    if t.kind == STRING:
        return t.sql
    if t.kind == NULL:
        return "CAST(NULL AS VARCHAR)"
    if t.kind == JSON:  # a JSON string's text, any other JSON value as JSON text
        text = f"json_extract_string({t.sql}, '$')"
        return f"(CASE WHEN json_type({t.sql}) = 'VARCHAR' THEN {text} ELSE CAST({t.sql} AS VARCHAR) END)"
    if is_array_kind(t.kind):
        return as_text(single(t))
    return f"CAST({t.sql} AS VARCHAR)"


def single(t: Typed) -> Typed:
    """An array read as a scalar: its one element, null unless it has exactly one."""
    element = element_kind(t.kind)
    return Typed(f"(CASE WHEN len({t.sql}) = 1 THEN {t.sql}[1] END)", element)


def as_array(t: Typed, kind: str | None = None) -> Typed:
    """`t` as an array (of `kind`, an array kind, when given): a scalar is the array of its one
    value, null stays null."""
    target = kind or array_of(t.kind)
    if t.kind == NULL:
        return Typed(f"CAST(NULL AS {_TO_DUCK[target]})", target)
    if not is_array_kind(t.kind):
        element = cast_to(t, element_kind(target))
        return Typed(f"(CASE WHEN {t.sql} IS NULL THEN NULL ELSE [{element.sql}] END)", target)
    if t.kind == target:
        return Typed(t.sql, target)
    v = Typed('"__e"', element_kind(t.kind))
    converted = cast_to(v, element_kind(target)).sql
    return Typed(f'list_transform({t.sql}, lambda "__e": {converted})', target)


def truth(t: Typed) -> str:
    """A SQL boolean (or NULL) for Druid's truthiness of a value."""
    if is_array_kind(t.kind) or t.kind == JSON:
        return truth(single(t)) if is_array_kind(t.kind) else truth(Typed(as_text(t), STRING))
    if t.kind == STRING:
        return f"(lower({t.sql}) = 'true')"
    if t.kind == NULL:
        return "CAST(NULL AS BOOLEAN)"
    return f"({t.sql} <> 0)"


def cast_to(t: Typed, kind: str) -> Typed:
    if kind == t.kind:
        return t
    if is_array_kind(kind):
        return as_array(t, kind)
    if kind == JSON:
        return Typed("CAST(NULL AS JSON)" if t.kind == NULL else f"CAST(to_json({t.sql}) AS JSON)", JSON)
    if kind == LONG:
        return Typed(as_long(t), LONG)
    if kind == DOUBLE:
        return Typed(as_double(t), DOUBLE)
    if kind == STRING:
        return Typed(as_text(t), STRING)
    raise invalid("Cannot cast to type [%s]", kind)


def common_kind(*kinds: str) -> str:
    """The type several branches share (nvl, if, case): arrays of the common element type when one
    is an array, COMPLEX<json> when one is, else STRING wins, then DOUBLE, then LONG."""
    real = [k for k in kinds if k != NULL]
    if not real:
        return STRING
    if any(is_array_kind(k) for k in real):
        return array_of(common_kind(*(element_kind(k) for k in real)))
    if JSON in real:
        return JSON
    if STRING in real:
        return STRING
    return DOUBLE if DOUBLE in real else LONG
