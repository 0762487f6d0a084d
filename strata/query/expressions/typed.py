"""Typed SQL fragments of Druid expressions and Druid's conversions between their types.

Druid types: LONG, DOUBLE, STRING, and NULL for an untyped null literal. Strings read as numbers
(for arithmetic) parse or become null; numbers cast to LONG truncate toward zero; a string is true
when it reads `true` (Java's Boolean.parseBoolean), a number when it is not zero.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from strata.query.duck import quote_str
from strata.query.errors import invalid
from strata.query.expressions.parser import Node

LONG, DOUBLE, STRING, NULL = "LONG", "DOUBLE", "STRING", "NULL"
_TO_DUCK = {LONG: "BIGINT", DOUBLE: "DOUBLE", STRING: "VARCHAR", NULL: "VARCHAR"}


@dataclass(frozen=True, slots=True)
class Typed:
    sql: str
    kind: str  # LONG, DOUBLE, STRING or NULL

    @property
    def duck_type(self) -> str:
        return _TO_DUCK[self.kind]


class Scope(Protocol):
    """What a function compiler needs: a way to compile its arguments."""

    def compile(self, node: Node) -> Typed: ...


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
    if t.kind == DOUBLE:
        return t.sql
    if t.kind == STRING:
        return f"TRY_CAST({t.sql} AS DOUBLE)"
    return f"CAST({t.sql} AS DOUBLE)"


def as_number(t: Typed) -> str:
    return as_double(t) if t.kind in (STRING, NULL) else t.sql


def as_long(t: Typed) -> str:
    """Druid's cast to LONG: numbers truncate toward zero, strings parse as numbers first."""
    if t.kind == LONG:
        return t.sql
    if t.kind == NULL:
        return "CAST(NULL AS BIGINT)"
    return f"CAST(trunc({as_double(t)}) AS BIGINT)"


def as_text(t: Typed) -> str:
    if t.kind == STRING:
        return t.sql
    if t.kind == NULL:
        return "CAST(NULL AS VARCHAR)"
    return f"CAST({t.sql} AS VARCHAR)"


def truth(t: Typed) -> str:
    """A SQL boolean (or NULL) for Druid's truthiness of a value."""
    if t.kind == STRING:
        return f"(lower({t.sql}) = 'true')"
    if t.kind == NULL:
        return "CAST(NULL AS BOOLEAN)"
    return f"({t.sql} <> 0)"


def cast_to(t: Typed, kind: str) -> Typed:
    if kind == t.kind:
        return t
    if kind == LONG:
        return Typed(as_long(t), LONG)
    if kind == DOUBLE:
        return Typed(as_double(t), DOUBLE)
    if kind == STRING:
        return Typed(as_text(t), STRING)
    raise invalid("Cannot cast to type [%s]", kind)


def common_kind(*kinds: str) -> str:
    """The type several branches share (nvl, if, case): STRING wins, then DOUBLE, then LONG."""
    real = [k for k in kinds if k != NULL]
    if not real:
        return STRING
    if STRING in real:
        return STRING
    return DOUBLE if DOUBLE in real else LONG
