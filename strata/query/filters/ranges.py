"""Range filters: bound (string orderings), range (typed bounds), interval (time ranges)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from strata.query.duck import is_array, quote_ident, quote_str
from strata.query.errors import invalid
from strata.query.fields import get_bool, get_list
from strata.query.filters.base import Filter, column_of, filter_type
from strata.query.filters.sql import (
    always_unless_null,
    array_literal,
    as_number,
    as_text,
    column_type,
    is_numeric,
    java_string,
    never,
    number_literal,
    per_value,
    text_is_number,
    to_number,
)
from strata.query.sql_functions import ALPHANUMERIC_CMP, VERSION_CMP
from strata.query.string_comparators import (
    ALPHANUMERIC,
    LEXICOGRAPHIC,
    NUMERIC,
    STRLEN,
    parse_number,
    parse_ordering,
)
from timeline import Interval


def _op(is_lower: bool, strict: bool) -> str:
    return (">" if is_lower else "<") + ("" if strict else "=")


def _numeric_side(types: Mapping[str, str], column: str, bound: str, is_lower: bool, strict: bool) -> str:
    """One side of a numeric-ordered bound: numbers by value, non-numbers below every number."""
    op = _op(is_lower, strict)
    number = parse_number(bound)
    if is_numeric(types, column):
        if number is not None:
            return f"({quote_ident(column)} {op} {number_literal(number)})"
        # Every number sorts above a non-numeric bound.
        return always_unless_null(column) if is_lower else never(column)
    text = as_text(types, column)
    is_num = text_is_number(text)
    if number is not None:
        compare = f"{as_number(types, column)} {op} {number_literal(number)}"
        return f"({is_num} AND {compare})" if is_lower else f"(NOT {is_num} OR {compare})"
    compare = f"{text} {op} {quote_str(bound)}"
    return f"({is_num} OR {compare})" if is_lower else f"(NOT {is_num} AND {compare})"


def _side(
    types: Mapping[str, str], column: str, bound: str, is_lower: bool, strict: bool, ordering: str
) -> str:
    op = _op(is_lower, strict)
    text = as_text(types, column)
    literal = quote_str(bound)
    if ordering == NUMERIC:
        return _numeric_side(types, column, bound, is_lower, strict)
    if ordering == LEXICOGRAPHIC:
        return f"({text} {op} {literal})"
    if ordering == STRLEN:
        longer = ">" if is_lower else "<"
        n = len(bound)
        return f"(length({text}) {longer} {n} OR (length({text}) = {n} AND {text} {op} {literal}))"
    function = ALPHANUMERIC_CMP if ordering == ALPHANUMERIC else VERSION_CMP
    return f"({function}({text}, {literal}) {op} 0)"


@dataclass(frozen=True, slots=True)
class BoundFilter(Filter):
    filter_type = "bound"
    dimension: str
    lower: str | None
    upper: str | None
    lower_strict: bool = False
    upper_strict: bool = False
    ordering: str = LEXICOGRAPHIC

    def to_sql(self, types: Mapping[str, str]) -> str:
        return per_value(types, self.dimension, self._scalar_sql, self.filter_type)

    def _scalar_sql(self, types: Mapping[str, str], column: str) -> str:
        parts = []
        if self.lower is not None:
            parts.append(_side(types, column, self.lower, True, self.lower_strict, self.ordering))
        if self.upper is not None:
            parts.append(_side(types, column, self.upper, False, self.upper_strict, self.ordering))
        matched = "(" + " AND ".join(parts) + ")"
        if self.lower is None:
            # Druid's BoundFilter sorts null before every value: with no lower bound it matches
            return f"({quote_ident(column)} IS NULL OR {matched})"
        return matched

    def columns(self) -> set[str]:
        return {self.dimension}

    def to_json(self) -> dict[str, Any]:
        return {
            "type": self.filter_type,
            "dimension": self.dimension,
            "lower": self.lower,
            "upper": self.upper,
            "lowerStrict": self.lower_strict,
            "upperStrict": self.upper_strict,
            "ordering": self.ordering,
        }


RANGE_VALUE_TYPES = ("STRING", "LONG", "DOUBLE", "FLOAT", "ARRAY<STRING>", "ARRAY<LONG>", "ARRAY<DOUBLE>")


@dataclass(frozen=True, slots=True)
class RangeFilter(Filter):
    """Typed bounds: the column is compared in the domain of `matchValueType`."""

    filter_type = "range"
    column: str
    match_value_type: str
    lower: Any
    upper: Any
    lower_open: bool = False
    upper_open: bool = False

    def to_sql(self, types: Mapping[str, str]) -> str:
        if self.match_value_type.startswith("ARRAY<"):
            return self._array_sql(types)
        return per_value(types, self.column, self._scalar_sql, self.filter_type)

    def _scalar_sql(self, types: Mapping[str, str], column: str) -> str:
        parts = []
        for bound, is_lower, strict in (
            (self.lower, True, self.lower_open),
            (self.upper, False, self.upper_open),
        ):
            if bound is None:
                continue
            op = _op(is_lower, strict)
            if self.match_value_type == "STRING":
                parts.append(f"({as_text(types, column)} {op} {quote_str(bound)})")
            else:
                parts.append(f"({as_number(types, column)} {op} {number_literal(bound)})")
        return "(" + " AND ".join(parts) + ")"

    def _array_sql(self, types: Mapping[str, str]) -> str:
        """Whole arrays compared element by element (an array column only)."""
        duck = column_type(types, self.column)
        if not is_array(duck):
            return never(self.column)
        parts = []
        for bound, is_lower, strict in (
            (self.lower, True, self.lower_open),
            (self.upper, False, self.upper_open),
        ):
            if bound is not None:
                literal = array_literal(list(bound), duck)
                parts.append(f"({quote_ident(self.column)} {_op(is_lower, strict)} {literal})")
        return "(" + " AND ".join(parts) + ")"

    def columns(self) -> set[str]:
        return {self.column}

    def to_json(self) -> dict[str, Any]:
        def plain(v: Any) -> Any:
            if isinstance(v, Decimal):
                whole = v == v.to_integral_value() and -(2**63) <= v < 2**63
                return int(v) if whole else float(v)  # past a LONG: JSON's double (beyond every row too)
            if isinstance(v, tuple):
                return [plain(e) for e in v]
            return v

        return {
            "type": self.filter_type,
            "column": self.column,
            "matchValueType": self.match_value_type,
            "lower": plain(self.lower),
            "upper": plain(self.upper),
            "lowerOpen": self.lower_open,
            "upperOpen": self.upper_open,
        }


@dataclass(frozen=True, slots=True)
class IntervalFilter(Filter):
    """Half-open millisecond ranges on a long column (normally `__time`), ORed together."""

    filter_type = "interval"
    dimension: str
    intervals: tuple[Interval, ...]

    def to_sql(self, types: Mapping[str, str]) -> str:
        return per_value(types, self.dimension, self._scalar_sql, self.filter_type)

    def _scalar_sql(self, types: Mapping[str, str], column: str) -> str:
        number = as_number(types, column)
        ranges = [f"({number} >= {i.start} AND {number} < {i.end})" for i in self.intervals]
        return "(" + " OR ".join(ranges) + ")"

    def columns(self) -> set[str]:
        return {self.dimension}

    def to_json(self) -> dict[str, Any]:
        return {
            "type": self.filter_type,
            "dimension": self.dimension,
            "intervals": [str(i) for i in self.intervals],
        }


def _bound_value(obj: Mapping[str, Any], key: str) -> str | None:
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, (str, int, float)) or isinstance(value, bool):
        raise invalid("Field [%s] of bound filter must be a string or a number", key)
    return java_string(value)


@filter_type("bound")
def _parse_bound(obj: Mapping[str, Any]) -> Filter:
    lower, upper = _bound_value(obj, "lower"), _bound_value(obj, "upper")
    if lower is None and upper is None:
        raise invalid("Filter [bound] needs at least one of [lower] and [upper]")
    # Druid: `ordering` wins; the legacy `alphaNumeric` flag applies only without it and must agree.
    alpha = obj.get("alphaNumeric")
    alpha_flag = None if alpha is None else get_bool(obj, "alphaNumeric", False, what="bound filter")
    if obj.get("ordering") is None:
        ordering = ALPHANUMERIC if alpha_flag else LEXICOGRAPHIC
    else:
        ordering = parse_ordering(obj["ordering"])
        if alpha_flag is not None and alpha_flag != (ordering == ALPHANUMERIC):
            raise invalid("Filter [bound]: mismatch between alphaNumeric and ordering property")
    return BoundFilter(
        dimension=column_of(obj, "bound"),
        lower=lower,
        upper=upper,
        lower_strict=get_bool(obj, "lowerStrict", False, what="bound filter"),
        upper_strict=get_bool(obj, "upperStrict", False, what="bound filter"),
        ordering=ordering,
    )


def _range_value(obj: Mapping[str, Any], key: str, value_type: str) -> Any:
    value = obj.get(key)
    if value is None:
        return None
    if value_type.startswith("ARRAY<"):
        items = value if isinstance(value, list) else [value]
        element = value_type[len("ARRAY<") : -1]
        return tuple(None if v is None else _range_value({key: v}, key, element) for v in items)
    if value_type == "STRING":
        if not isinstance(value, (str, int, float)) or isinstance(value, bool):
            raise invalid("Field [%s] of range filter must be a string", key)
        return java_string(value)
    number = to_number(value)
    if number is None or not number.is_finite():
        raise invalid("Field [%s] of range filter must be a %s, got %r", key, value_type, value)
    return number


@filter_type("range")
def _parse_range(obj: Mapping[str, Any]) -> Filter:
    value_type = obj.get("matchValueType")
    if not isinstance(value_type, str) or value_type.upper() not in RANGE_VALUE_TYPES:
        raise invalid("Filter [range] needs [matchValueType] as one of %s", ", ".join(RANGE_VALUE_TYPES))
    value_type = value_type.upper()
    lower, upper = _range_value(obj, "lower", value_type), _range_value(obj, "upper", value_type)
    if lower is None and upper is None:
        raise invalid("Filter [range] needs at least one of [lower] and [upper]")
    return RangeFilter(
        column=column_of(obj, "range", "column"),
        match_value_type=value_type,
        lower=lower,
        upper=upper,
        lower_open=get_bool(obj, "lowerOpen", False, what="range filter"),
        upper_open=get_bool(obj, "upperOpen", False, what="range filter"),
    )


@filter_type("interval")
def _parse_interval(obj: Mapping[str, Any]) -> Filter:
    texts = get_list(obj, "intervals", what="interval filter")
    if not texts:
        raise invalid("Filter [interval] needs at least one interval")
    intervals = []
    for text in texts:
        if not isinstance(text, str):
            raise invalid("Intervals of interval filter must be ISO-8601 strings, got %r", text)
        try:
            intervals.append(Interval.parse(text))
        except ValueError as e:
            raise invalid("Invalid interval [%s] in interval filter: %s", text, e) from None
    return IntervalFilter(column_of(obj, "interval"), tuple(intervals))
