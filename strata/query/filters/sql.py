"""SQL building blocks for filters over typed columns, with Druid's value coercions.

Druid compares a filter's string value against a numeric column by parsing the value (an
unparseable value matches nothing), and against a string column as text. Where a string column is
compared with a number (typed `equals`/`in`/`range`), a string that is no number casts to NULL and
so compares as unknown, as SQL's CAST would. Every literal goes
through `quote_str`; no raw text reaches the SQL.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from strata.query.duck import quote_ident, quote_str
from strata.query.string_comparators import NUMBER_PATTERN, parse_number

INTEGER_TYPES = frozenset({"BIGINT", "INTEGER", "SMALLINT", "TINYINT", "HUGEINT", "UBIGINT", "UINTEGER"})
FLOAT_TYPES = frozenset({"FLOAT", "DOUBLE", "REAL"})
NUMERIC_TYPES = INTEGER_TYPES | FLOAT_TYPES
_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1


def column_type(types: Mapping[str, str], column: str) -> str:
    return types.get(column, "VARCHAR").upper()


def is_numeric(types: Mapping[str, str], column: str) -> bool:
    return column_type(types, column) in NUMERIC_TYPES


def as_text(types: Mapping[str, str], column: str) -> str:
    """The column as VARCHAR (numbers in their string form, as Druid's string predicates see them)."""
    ident = quote_ident(column)
    return ident if column_type(types, column) == "VARCHAR" else f"CAST({ident} AS VARCHAR)"


def text_is_number(text_expr: str) -> str:
    """Whether a VARCHAR expression spells a number (Java BigDecimal syntax); NULL for NULL."""
    return f"regexp_full_match({text_expr}, {quote_str(NUMBER_PATTERN)})"


def as_number(types: Mapping[str, str], column: str) -> str:
    """The column as a number; strings that are not numbers become NULL."""
    if is_numeric(types, column):
        return quote_ident(column)
    text = as_text(types, column)
    return f"CAST(CASE WHEN {text_is_number(text)} THEN {text} END AS DOUBLE)"


def number_literal(value: Decimal, sql_type: str = "DOUBLE") -> str:
    if value == value.to_integral_value() and _LONG_MIN <= value <= _LONG_MAX and sql_type != "FLOAT":
        return str(int(value))
    return f"CAST({quote_str(repr(float(value)))} AS {'FLOAT' if sql_type == 'FLOAT' else 'DOUBLE'})"


def to_number(value: Any) -> Decimal | None:
    """A JSON value as an exact number, or None when it is not one."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return Decimal(value)
    if isinstance(value, float):
        return Decimal(repr(value))
    if isinstance(value, str):
        return parse_number(value)
    return None


def java_string(value: Any) -> str:
    """How Druid turns a JSON scalar into the string it compares (Jackson/Java conventions)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if value.is_integer() and abs(value) < 1e7:
            return f"{value:.1f}"
        return repr(value).replace("e+", "E").replace("e-", "E-")
    return str(value)


def never(column: str) -> str:
    """Matches nothing, but stays unknown on NULL so that `not` keeps SQL's three-valued logic."""
    return f"(CASE WHEN {quote_ident(column)} IS NULL THEN NULL ELSE FALSE END)"


def always_unless_null(column: str) -> str:
    return f"(CASE WHEN {quote_ident(column)} IS NULL THEN NULL ELSE TRUE END)"


def equals_sql(types: Mapping[str, str], column: str, value: Any, value_type: str = "STRING") -> str:
    """`column = value` with Druid's coercions; `value_type` is the match value's Druid type."""
    ctype = column_type(types, column)
    ident = quote_ident(column)
    if ctype in NUMERIC_TYPES:
        number = to_number(value)
        if number is None or not number.is_finite():
            return never(column)
        if ctype in INTEGER_TYPES:
            if number != number.to_integral_value():
                return never(column)
            return f"({ident} = {number_literal(number)})"
        return f"({ident} = {number_literal(number, ctype)})"
    if value_type in ("LONG", "DOUBLE", "FLOAT"):
        number = to_number(value)
        if number is None:
            return never(column)
        return f"({as_number(types, column)} = {number_literal(number)})"
    return f"({as_text(types, column)} = {quote_str(java_string(value))})"


_LONG_LIST = 256
_SEPARATOR = "\x1f"  # ASCII unit separator


def in_sql(types: Mapping[str, str], column: str, values: list[Any], value_type: str = "STRING") -> str:
    """`column IN values`, where a null among the values matches NULL rows (Druid, unlike SQL)."""
    ident = quote_ident(column)
    present = [v for v in values if v is not None]
    parts: list[str] = []
    if present:
        ctype = column_type(types, column)
        if ctype == "VARCHAR" and value_type == "STRING":
            strings = sorted({java_string(v) for v in present})
            if len(strings) > _LONG_LIST and not any(_SEPARATOR in v for v in strings):
                # DuckDB parses one long string far faster than thousands of literals (1.6 s for
                # 100,000 values); split at run time it is the same set, with the same null rules
                joined = quote_str(_SEPARATOR.join(strings))
                parts.append(f"{ident} IN (SELECT unnest(string_split({joined}, chr({ord(_SEPARATOR)}))))")
            else:
                literals = [quote_str(v) for v in strings]
                parts.append(f"{ident} IN ({', '.join(literals)})")
        else:
            parts.extend(equals_sql(types, column, v, value_type) for v in present)
    if len(present) != len(values):
        parts.append(f"{ident} IS NULL")
    if not parts:
        return never(column)
    return "(" + " OR ".join(parts) + ")"
