"""Boolean combinators and constants: and, or, not, true, false."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from query.errors import invalid
from query.fields import get_list
from query.filters.base import Filter, filter_type, parse_required


@dataclass(frozen=True, slots=True)
class AndFilter(Filter):
    filter_type = "and"
    fields: tuple[Filter, ...]

    def to_sql(self, types: Mapping[str, str]) -> str:
        return "(" + " AND ".join(f.to_sql(types) for f in self.fields) + ")"

    def columns(self) -> set[str]:
        return set().union(*(f.columns() for f in self.fields))

    def to_json(self) -> dict[str, Any]:
        return {"type": self.filter_type, "fields": [f.to_json() for f in self.fields]}


@dataclass(frozen=True, slots=True)
class OrFilter(Filter):
    filter_type = "or"
    fields: tuple[Filter, ...]

    def to_sql(self, types: Mapping[str, str]) -> str:
        return "(" + " OR ".join(f.to_sql(types) for f in self.fields) + ")"

    def columns(self) -> set[str]:
        return set().union(*(f.columns() for f in self.fields))

    def to_json(self) -> dict[str, Any]:
        return {"type": self.filter_type, "fields": [f.to_json() for f in self.fields]}


@dataclass(frozen=True, slots=True)
class NotFilter(Filter):
    filter_type = "not"
    field: Filter

    def to_sql(self, types: Mapping[str, str]) -> str:
        return f"(NOT {self.field.to_sql(types)})"

    def columns(self) -> set[str]:
        return self.field.columns()

    def to_json(self) -> dict[str, Any]:
        return {"type": self.filter_type, "field": self.field.to_json()}


@dataclass(frozen=True, slots=True)
class TrueFilter(Filter):
    filter_type = "true"

    def to_sql(self, types: Mapping[str, str]) -> str:
        return "TRUE"

    def columns(self) -> set[str]:
        return set()

    def to_json(self) -> dict[str, Any]:
        return {"type": self.filter_type}


@dataclass(frozen=True, slots=True)
class FalseFilter(Filter):
    filter_type = "false"

    def to_sql(self, types: Mapping[str, str]) -> str:
        return "FALSE"

    def columns(self) -> set[str]:
        return set()

    def to_json(self) -> dict[str, Any]:
        return {"type": self.filter_type}


def _fields(obj: Mapping[str, Any], kind: str) -> tuple[Filter, ...]:
    fields = get_list(obj, "fields", what=f"{kind} filter")
    if not fields:
        raise invalid("Filter [%s] needs at least one field", kind)
    return tuple(parse_required(f, f"{kind} filter field") for f in fields)


@filter_type("and")
def _parse_and(obj: Mapping[str, Any]) -> Filter:
    return AndFilter(_fields(obj, "and"))


@filter_type("or")
def _parse_or(obj: Mapping[str, Any]) -> Filter:
    return OrFilter(_fields(obj, "or"))


@filter_type("not")
def _parse_not(obj: Mapping[str, Any]) -> Filter:
    if obj.get("field") is None:
        raise invalid("Filter [not] needs a [field]")
    return NotFilter(parse_required(obj["field"], "not filter field"))


@filter_type("true")
def _parse_true(obj: Mapping[str, Any]) -> Filter:
    return TrueFilter()


@filter_type("false")
def _parse_false(obj: Mapping[str, Any]) -> Filter:
    return FalseFilter()
