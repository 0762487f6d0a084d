"""`filtered`: an aggregator that only sees rows matching a filter (SQL `FILTER (WHERE ...)`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from strata.query.aggregators.base import Aggregator, aggregator_type, parse_aggregator
from strata.query.errors import invalid
from strata.query.filters import Filter, parse_filter


@dataclass(frozen=True)
class FilteredAggregator(Aggregator):
    type_name = "filtered"
    name: str
    filter: Filter
    inner: Aggregator

    def columns(self) -> set[str]:
        return self.inner.columns() | self.filter.columns()

    def split_invariant(self) -> bool:
        return self.inner.split_invariant()

    def reads_element_positions(self) -> bool:
        return self.inner.reads_element_positions()

    def intermediate_fields(self, col: str) -> list[pa.Field]:
        return self.inner.intermediate_fields(col)

    def partial_sql(self, col: str, types: Mapping[str, str], cond: str | None) -> list[str]:
        own = f"({self.filter.to_sql(types)})"
        return self.inner.partial_sql(col, types, own if cond is None else f"({cond}) AND {own}")

    def merge_sql(self, col: str) -> list[str]:
        return self.inner.merge_sql(col)

    def finalize(self, table: pa.Table, col: str) -> pa.Array:
        return self.inner.finalize(table, col)

    def raw(self, table: pa.Table, col: str) -> pa.Array:
        return self.inner.raw(table, col)

    def unfinalized_json(self, table: pa.Table, col: str) -> list[Any]:
        return self.inner.unfinalized_json(table, col)

    def to_json(self) -> dict[str, Any]:
        return {
            "type": "filtered",
            "name": self.name,
            "filter": self.filter.to_json(),
            "aggregator": self.inner.to_json(),
        }


@aggregator_type("filtered")
def _filtered(obj: Mapping[str, Any]) -> Aggregator:
    if obj.get("aggregator") is None:
        raise invalid("Missing required field [aggregator] of filtered aggregator")
    if obj.get("filter") is None:
        raise invalid("Missing required field [filter] of filtered aggregator")
    inner = parse_aggregator(obj["aggregator"])
    flt = parse_filter(obj["filter"])
    assert flt is not None
    name = obj.get("name")
    if name is not None:
        if not isinstance(name, str) or not name:
            raise invalid("Field [name] of filtered aggregator must be a non-empty string")
        inner = dataclasses.replace(inner, name=name)  # type: ignore[type-var]  # every aggregator class is a dataclass, their base is not
    return FilteredAggregator(inner.name, flt, inner)
