"""Druid's aggregators as SQL partials, associative merges and finalizers."""

from __future__ import annotations

from typing import Any

# Importing each aggregator module registers its types with query.aggregators.base's parser.
from strata.query.aggregators import filtered, first_last, simple, sketches  # noqa: F401
from strata.query.aggregators.base import Aggregator, json_values, parse_aggregator
from strata.query.errors import invalid
from strata.query.fields import get_list


def parse_aggregators(obj: Any, key: str = "aggregations") -> tuple[Aggregator, ...]:
    """A query's aggregator list; names must be unique."""
    raw = get_list(obj, key, [])
    aggs = tuple(parse_aggregator(a) for a in raw)
    seen: set[str] = set()
    for a in aggs:
        if a.name in seen:
            raise invalid("Duplicate aggregator name [%s]", a.name)
        seen.add(a.name)
    return aggs


__all__ = ["Aggregator", "json_values", "parse_aggregator", "parse_aggregators"]
