"""Grouping on multi-value dimensions: one group per value, as Druid's topN and groupBy group them.

A row of a multi-value STRING column counts once under each of its values (a row with no value
under null), like an implicit `UNNEST`; two such dimensions give every pair of values. DuckDB's
`unnest` in a SELECT list zips several lists instead of pairing them, so each exploded dimension
gets its own projection over the one below it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from strata.query.dimensions import DimensionSpec
from strata.query.duck import is_multi_value, quote_ident
from strata.query.errors import invalid
from strata.query.filters.sql import VALUE, values_or_null

MULTI_VALUE_KEY = "groupByEnableMultiValueUnnesting"


def exploded_name(i: int) -> str:
    return f"__value{i}"


def explode(
    relation: str,
    types: Mapping[str, str],
    dimensions: Sequence[DimensionSpec],
    allowed: bool = True,
) -> tuple[str, dict[str, str], tuple[DimensionSpec, ...]]:
    """`relation` with one row per value of each multi-value dimension (`__value<i>`), its column
    types, and the dimensions reading those values; unchanged when no dimension is multi-value.
    `allowed=False` (groupByEnableMultiValueUnnesting off) refuses a multi-value dimension."""
    scope = dict(types)
    out: list[DimensionSpec] = []
    for i, dim in enumerate(dimensions):
        if not is_multi_value(types.get(dim.dimension)):
            out.append(dim)
            continue
        if not allowed:
            raise invalid(
                "Encountered multi-value dimension [%s] that cannot be processed with '%s' set to false. "
                "Consider setting '%s' to true in your query context.",
                dim.dimension,
                MULTI_VALUE_KEY,
                MULTI_VALUE_KEY,
            )
        name = exploded_name(i)
        values = quote_ident(dim.dimension)
        if dim.value_filter is not None:  # a filtered spec keeps some values; none left is null
            kept = dim.value_filter.sql(quote_ident(VALUE))
            values = f"list_filter({values}, lambda {quote_ident(VALUE)}: {kept})"
        relation = f"SELECT *, unnest({values_or_null(values)}) AS {quote_ident(name)} FROM ({relation})"
        scope[name] = "VARCHAR"
        out.append(dataclasses.replace(dim, dimension=name, value_filter=None))
    return relation, scope, tuple(out)
