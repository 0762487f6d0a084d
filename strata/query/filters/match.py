"""Value matching filters: selector, equals, null, in."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from strata.query.duck import is_array, is_multi_value, quote_ident
from strata.query.errors import QueryUnsupported, invalid
from strata.query.fields import get_list
from strata.query.filters.base import Filter, column_of, filter_type
from strata.query.filters.sql import (
    array_literal,
    as_text,
    column_type,
    equals_sql,
    in_sql,
    java_string,
    never,
    per_value,
    refused_on_array,
    row_values,
)

MATCH_VALUE_TYPES = ("STRING", "LONG", "DOUBLE", "FLOAT")
ARRAY_VALUE_TYPES = {"ARRAY<STRING>": "VARCHAR[]", "ARRAY<LONG>": "BIGINT[]", "ARRAY<DOUBLE>": "DOUBLE[]",
                     "ARRAY<FLOAT>": "DOUBLE[]"}  # fmt: skip


def is_null_sql(types: Mapping[str, str], column: str) -> str:
    """Druid's null match: a null value (a multi-value row with no value, or holding a null one; an
    array whose whole value is null)."""
    if is_multi_value(column_type(types, column)):
        return per_value(types, column, lambda t, c: f"({quote_ident(c)} IS NULL)", "null")
    return f"({quote_ident(column)} IS NULL)"


def _scalar(value: Any, what: str) -> Any:
    """A scalar match value (None allowed)."""
    if value is not None and not isinstance(value, (str, int, float, bool)):
        raise invalid("%s must be a string, a number or null", what)
    return value


def _value_type(obj: Mapping[str, Any], kind: str, arrays: bool = False) -> str:
    value = obj.get("matchValueType")
    if not isinstance(value, str):
        raise invalid("Filter [%s] needs a [matchValueType]", kind)
    upper = value.upper()
    if arrays and upper in ARRAY_VALUE_TYPES:
        return upper
    if upper not in MATCH_VALUE_TYPES:
        raise invalid(
            "Filter [%s] matchValueType [%s] is not supported; use one of %s",
            kind,
            value,
            ", ".join(MATCH_VALUE_TYPES),
        )
    return upper


@dataclass(frozen=True, slots=True)
class SelectorFilter(Filter):
    """Druid's legacy equality on the string form of a value; a null value matches NULL."""

    filter_type = "selector"
    dimension: str
    value: str | None

    def to_sql(self, types: Mapping[str, str]) -> str:
        if self.value is None:
            return is_null_sql(types, self.dimension)
        if is_array(column_type(types, self.dimension)):
            raise refused_on_array(self.filter_type, self.dimension)
        return equals_sql(types, self.dimension, self.value)

    def columns(self) -> set[str]:
        return {self.dimension}

    def to_json(self) -> dict[str, Any]:
        return {"type": self.filter_type, "dimension": self.dimension, "value": self.value}


@dataclass(frozen=True, slots=True)
class EqualsFilter(Filter):
    filter_type = "equals"
    column: str
    match_value_type: str
    match_value: Any

    def to_sql(self, types: Mapping[str, str]) -> str:
        array_type = ARRAY_VALUE_TYPES.get(self.match_value_type)
        if array_type is None:
            return equals_sql(types, self.column, self.match_value, self.match_value_type)
        if not is_array(column_type(types, self.column)):
            return never(self.column)  # an array matches only an array column's whole value
        ident = quote_ident(self.column)
        return f"({ident} = {array_literal(list(self.match_value), array_type)})"

    def columns(self) -> set[str]:
        return {self.column}

    def to_json(self) -> dict[str, Any]:
        value = list(self.match_value) if isinstance(self.match_value, tuple) else self.match_value
        return {
            "type": self.filter_type,
            "column": self.column,
            "matchValueType": self.match_value_type,
            "matchValue": value,
        }


@dataclass(frozen=True, slots=True)
class NullFilter(Filter):
    filter_type = "null"
    column: str

    def to_sql(self, types: Mapping[str, str]) -> str:
        return is_null_sql(types, self.column)

    def columns(self) -> set[str]:
        return {self.column}

    def to_json(self) -> dict[str, Any]:
        return {"type": self.filter_type, "column": self.column}


@dataclass(frozen=True, slots=True)
class InFilter(Filter):
    """Membership; a null among the values matches NULL rows (Druid's rule, unlike SQL's IN)."""

    filter_type = "in"
    dimension: str
    values: tuple[Any, ...]
    match_value_type: str = "STRING"

    def to_sql(self, types: Mapping[str, str]) -> str:
        return in_sql(types, self.dimension, list(self.values), self.match_value_type)

    def columns(self) -> set[str]:
        return {self.dimension}

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.filter_type, "dimension": self.dimension}
        if self.match_value_type != "STRING":
            out["matchValueType"] = self.match_value_type
        out["values"] = list(self.values)
        return out


@filter_type("selector")
def _parse_selector(obj: Mapping[str, Any]) -> Filter:
    value = _scalar(obj.get("value"), "Field [value] of selector filter")
    return SelectorFilter(column_of(obj, "selector"), None if value is None else java_string(value))


@filter_type("equals")
def _parse_equals(obj: Mapping[str, Any]) -> Filter:
    value_type = _value_type(obj, "equals", arrays=True)
    raw = obj.get("matchValue")
    if raw is None:
        raise invalid("Filter [equals] needs a non-null [matchValue]; use the [null] filter to match nulls")
    if value_type in ARRAY_VALUE_TYPES:
        items = raw if isinstance(raw, list) else [raw]  # a scalar matches as a one-element array
        value: Any = tuple(_scalar(v, "Elements of [matchValue] of equals filter") for v in items)
    else:
        value = _scalar(raw, "Field [matchValue] of equals filter")
    return EqualsFilter(column_of(obj, "equals", "column"), value_type, value)


@filter_type("null")
def _parse_null(obj: Mapping[str, Any]) -> Filter:
    return NullFilter(column_of(obj, "null", "column"))


@dataclass(frozen=True, slots=True)
class TypedInFilter(InFilter):
    """Druid 28+'s `inType`, which its SQL planner writes for `col IN (...)`: the same membership,
    the values typed by `matchValueType`."""

    filter_type = "inType"

    def to_json(self) -> dict[str, Any]:
        return {
            "type": self.filter_type,
            "column": self.dimension,
            "matchValueType": self.match_value_type,
            "sortedValues": list(self.values),
        }


@filter_type("in")
def _parse_in(obj: Mapping[str, Any]) -> Filter:
    if "sortedValues" in obj or "matchValueType" in obj:  # Druid's typed in filter (SQL planner)
        return InFilter(column_of(obj, "in"), *_typed_values(obj, "in"))
    raw = get_list(obj, "values", what="in filter")
    values = [_scalar(v, "Values of in filter") for v in raw]
    return InFilter(column_of(obj, "in"), _canonical([None if v is None else java_string(v) for v in values]))


@filter_type("inType")
def _parse_in_type(obj: Mapping[str, Any]) -> Filter:
    return TypedInFilter(column_of(obj, "inType", "column"), *_typed_values(obj, "inType"))


def _typed_values(obj: Mapping[str, Any], kind: str) -> tuple[tuple[Any, ...], str]:
    raw = get_list(obj, "sortedValues" if "sortedValues" in obj else "values", what=f"{kind} filter")
    value_type = _value_type(obj, kind)
    values = [_scalar(v, f"Values of {kind} filter") for v in raw]
    if value_type == "STRING":
        values = [None if v is None else java_string(v) for v in values]
    return _canonical(values), value_type


def _canonical(values: list[Any]) -> tuple[Any, ...]:
    """Order and duplicates do not change the result: a canonical order keeps cache keys stable."""
    return tuple(sorted(set(values), key=lambda v: (v is not None, str(v))))


@dataclass(frozen=True, slots=True)
class ColumnComparisonFilter(Filter):
    """Rows where every listed column holds the same value, compared as strings (null equals null)."""

    filter_type = "columnComparison"
    dimensions: tuple[str, ...]

    def to_sql(self, types: Mapping[str, str]) -> str:
        if any(is_multi_value(column_type(types, d)) for d in self.dimensions):
            # multi-value columns match when their values overlap (a row with none is one null)
            values = [_values_of(types, d) for d in self.dimensions]
            pairs = [f"list_has_any({a}, {b})" for a, b in itertools.pairwise(values)]
            return "(" + " AND ".join(pairs) + ")"
        texts = [as_text(types, d) for d in self.dimensions]
        pairs = [f"({a} IS NOT DISTINCT FROM {b})" for a, b in itertools.pairwise(texts)]
        return "(" + " AND ".join(pairs) + ")"

    def columns(self) -> set[str]:
        return set(self.dimensions)

    def to_json(self) -> dict[str, Any]:
        return {"type": self.filter_type, "dimensions": list(self.dimensions)}


def _values_of(types: Mapping[str, str], column: str) -> str:
    if is_multi_value(column_type(types, column)):
        return row_values(column)
    return f"[{as_text(types, column)}]"


@filter_type("columnComparison")
def _parse_column_comparison(obj: Mapping[str, Any]) -> Filter:
    dims = obj.get("dimensions")
    if not isinstance(dims, list) or len(dims) < 2:
        raise invalid("Filter [columnComparison] needs at least two [dimensions]")
    names: list[str] = []
    for d in dims:
        if isinstance(d, Mapping) and d.get("type", "default") == "default" and d.get("extractionFn") is None:
            d = d.get("dimension")
        if not isinstance(d, str) or not d:
            raise QueryUnsupported("Filter [columnComparison] takes column names or default dimension specs")
        names.append(d)
    return ColumnComparisonFilter(tuple(names))


@dataclass(frozen=True, slots=True)
class ArrayContainsElementFilter(Filter):
    """Rows whose array (or multi-value string) holds the element; a scalar column is the
    one-element array of its value (Druid's `arrayContainsElement`)."""

    filter_type = "arrayContainsElement"
    column: str
    element_type: str
    element: Any

    def to_sql(self, types: Mapping[str, str]) -> str:
        duck = column_type(types, self.column)
        if not is_array(duck):
            if self.element is None:
                return is_null_sql(types, self.column)
            return equals_sql(types, self.column, self.element, self.element_type)
        ident = quote_ident(self.column)
        if self.element is None:  # an element that is null
            return f"(list_count({ident}) < len({ident}))"
        item = array_literal([self.element], duck)
        return f"list_contains({ident}, {item}[1])"

    def columns(self) -> set[str]:
        return {self.column}

    def to_json(self) -> dict[str, Any]:
        return {
            "type": self.filter_type,
            "column": self.column,
            "elementMatchValueType": self.element_type,
            "elementMatchValue": self.element,
        }


@filter_type("arrayContainsElement")
def _parse_array_contains(obj: Mapping[str, Any]) -> Filter:
    kind = obj.get("elementMatchValueType")
    if not isinstance(kind, str) or kind.upper() not in MATCH_VALUE_TYPES:
        raise invalid(
            "Filter [arrayContainsElement] needs [elementMatchValueType] as one of %s",
            ", ".join(MATCH_VALUE_TYPES),
        )
    value = _scalar(obj.get("elementMatchValue"), "Field [elementMatchValue] of arrayContainsElement filter")
    return ArrayContainsElementFilter(column_of(obj, "arrayContainsElement", "column"), kind.upper(), value)
