"""SQL building blocks for filters over typed columns, with Druid's value coercions.

Druid compares a filter's string value against a numeric column by parsing the value (an
unparseable value matches nothing), and against a string column as text. Where a string column is
compared with a number (typed `equals`/`in`/`range`), a string that is no number casts to NULL and
so compares as unknown, as SQL's CAST would. Every literal goes
through `quote_str`; no raw text reaches the SQL.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any

from strata.query.duck import element_type, is_array, is_multi_value, quote_ident, quote_str
from strata.query.errors import invalid
from strata.query.string_comparators import NUMBER_PATTERN, parse_number

INTEGER_TYPES = frozenset({"BIGINT", "INTEGER", "SMALLINT", "TINYINT", "HUGEINT", "UBIGINT", "UINTEGER"})
FLOAT_TYPES = frozenset({"FLOAT", "DOUBLE", "REAL"})
NUMERIC_TYPES = INTEGER_TYPES | FLOAT_TYPES
_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1


def column_type(types: Mapping[str, str], column: str) -> str:
    return types.get(column, "VARCHAR").upper()


# -- multi-value strings and arrays ---------------------------------------------------------------
VALUE = "__value"  # the lambda parameter standing for one value of a multi-value row

Render = Callable[[Mapping[str, str], str], str]


def per_value(types: Mapping[str, str], column: str, render: Render, kind: str) -> str:
    """`render(types, column)` (a predicate over a scalar column) with Druid's rules for a column
    holding several values: on a multi-value STRING it matches a row when any value matches, a row
    with no value counting as one null value; on an ARRAY it is an error, as in Druid (arrays are
    matched whole by equality, range, null and arrayContainsElement filters)."""
    duck = column_type(types, column)
    if is_array(duck):
        raise refused_on_array(kind, column)
    if not is_multi_value(duck):
        return render(types, column)
    return any_value(column, render({**types, VALUE: "VARCHAR"}, VALUE))


def refused_on_array(kind: str, column: str) -> Exception:
    return invalid(
        "Filter [%s] cannot match ARRAY column [%s]; use an [equals], [range], [null] or "
        "[arrayContainsElement] filter",
        kind,
        column,
    )


def row_values(column: str) -> str:
    """A multi-value row's values, a row with none as one null value (Druid's empty row is null)."""
    return values_or_null(quote_ident(column))


def values_or_null(values: str) -> str:
    """A list expression of strings, an empty or null one as the one null value."""
    return f"(CASE WHEN len({values}) > 0 THEN {values} ELSE [NULL::VARCHAR] END)"


def any_value(column: str, element: str) -> str:
    """Whether `element` (a predicate over `VALUE`) holds for some value of the row."""
    return any_of(row_values(column), element)


def any_of(values: str, element: str) -> str:
    """Whether `element` (a predicate over `VALUE`) holds for some element of the list `values`, in
    three-valued logic: true when one does, unknown when none does but one is unknown, else false."""
    mark = f"coalesce(CAST(({element}) AS INTEGER) * 2, 1)"  # 2 true, 1 unknown, 0 false
    marks = f"list_transform({values}, lambda {quote_ident(VALUE)}: {mark})"
    return f"(CASE list_max({marks}) WHEN 2 THEN TRUE WHEN 1 THEN NULL ELSE FALSE END)"


def contains_value(column: str, literal: str) -> str:
    """`any_value` of `value = literal` for a multi-value column, with DuckDB's list search."""
    ident = quote_ident(column)
    unknown = holds_null(column)
    return f"(CASE WHEN list_contains({ident}, {literal}) THEN TRUE WHEN {unknown} THEN NULL ELSE FALSE END)"


def holds_null(column: str) -> str:
    """Whether a multi-value row has a null value (no value at all counts as one)."""
    ident = quote_ident(column)
    return f"({ident} IS NULL OR len({ident}) = 0 OR list_count({ident}) < len({ident}))"


def array_literal(values: list[Any], duck: str) -> str:
    """A JSON array as a DuckDB list of type `duck` (`BIGINT[]`, `DOUBLE[]`, `VARCHAR[]`)."""
    element = element_type(duck)
    items = []
    for v in values:
        if v is None:
            items.append("NULL")
        elif element == "VARCHAR":
            items.append(quote_str(java_string(v)))
        else:
            number = v if isinstance(v, Decimal) else to_number(v)
            items.append("NULL" if number is None else number_literal(number, element))
    return f"CAST([{', '.join(items)}] AS {duck})"


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
    """`column = value` with Druid's coercions; `value_type` is the match value's Druid type. A
    multi-value column matches when one of its values does."""
    ctype = column_type(types, column)
    if is_multi_value(ctype):
        if value_type == "STRING":
            return contains_value(column, quote_str(java_string(value)))
        return per_value(types, column, lambda t, c: equals_sql(t, c, value, value_type), "equals")
    if is_array(ctype):
        return never(column)  # a scalar never equals a whole array
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
        # Druid's EqualityFilter reads the string as a number; one that is no number is no match
        # (false, not unknown), so `not` matches it
        number = to_number(value)
        if number is None:
            return never(column)
        text = as_text(types, column)
        matched = f"{as_number(types, column)} = {number_literal(number)}"
        return (
            f"(CASE WHEN {text} IS NULL THEN NULL WHEN {text_is_number(text)} THEN {matched} ELSE FALSE END)"
        )
    return f"({as_text(types, column)} = {quote_str(java_string(value))})"


_LONG_LIST = 256
_SEPARATOR = "\x1f"  # ASCII unit separator


def in_sql(types: Mapping[str, str], column: str, values: list[Any], value_type: str = "STRING") -> str:
    """`column IN values`, where a null among the values matches NULL rows (Druid, unlike SQL)."""
    strings = sorted({java_string(v) for v in values if v is not None})
    if (
        is_multi_value(column_type(types, column))
        and value_type == "STRING"
        and 0 < len(strings) <= _LONG_LIST
    ):
        # DuckDB's list search once per value: 2-3x faster than a lambda over the row's values
        found = [contains_value(column, quote_str(v)) for v in strings]
        return "(" + " OR ".join([*found, *([holds_null(column)] if None in values else [])]) + ")"
    if is_multi_value(column_type(types, column)) or is_array(column_type(types, column)):
        return per_value(types, column, lambda t, c: in_sql(t, c, values, value_type), "in")
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
