"""Value matching filters: selector, equals, null, in."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from strata.query.duck import quote_ident
from strata.query.errors import QueryUnsupported, invalid
from strata.query.fields import get_list
from strata.query.filters.base import Filter, column_of, filter_type
from strata.query.filters.sql import as_text, equals_sql, in_sql, java_string

MATCH_VALUE_TYPES = ("STRING", "LONG", "DOUBLE", "FLOAT")


def _scalar(value: Any, what: str) -> Any:
    if value is not None and not isinstance(value, (str, int, float, bool)):
        raise invalid("%s must be a string, a number or null", what)
    return value


def _value_type(obj: Mapping[str, Any], kind: str) -> str:
    value = obj.get("matchValueType")
    if not isinstance(value, str):
        raise invalid("Filter [%s] needs a [matchValueType]", kind)
    upper = value.upper()
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
            return f"({quote_ident(self.dimension)} IS NULL)"
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
        return equals_sql(types, self.column, self.match_value, self.match_value_type)

    def columns(self) -> set[str]:
        return {self.column}

    def to_json(self) -> dict[str, Any]:
        return {
            "type": self.filter_type,
            "column": self.column,
            "matchValueType": self.match_value_type,
            "matchValue": self.match_value,
        }


@dataclass(frozen=True, slots=True)
class NullFilter(Filter):
    filter_type = "null"
    column: str

    def to_sql(self, types: Mapping[str, str]) -> str:
        return f"({quote_ident(self.column)} IS NULL)"

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
    value = _scalar(obj.get("matchValue"), "Field [matchValue] of equals filter")
    if value is None:
        raise invalid("Filter [equals] needs a non-null [matchValue]; use the [null] filter to match nulls")
    return EqualsFilter(column_of(obj, "equals", "column"), _value_type(obj, "equals"), value)


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
        texts = [as_text(types, d) for d in self.dimensions]
        pairs = [f"({a} IS NOT DISTINCT FROM {b})" for a, b in itertools.pairwise(texts)]
        return "(" + " AND ".join(pairs) + ")"

    def columns(self) -> set[str]:
        return set(self.dimensions)

    def to_json(self) -> dict[str, Any]:
        return {"type": self.filter_type, "dimensions": list(self.dimensions)}


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
