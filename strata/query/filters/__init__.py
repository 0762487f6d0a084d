"""Druid's native filters, parsed into immutable trees that render as DuckDB SQL.

`parse_filter(obj)` returns a `Filter` (or None); `Filter.to_sql(types)` gives a boolean
expression over columns typed as in `types` (DuckDB type names, `__time` BIGINT epoch ms),
`Filter.columns()` the columns it reads, `Filter.to_json()` its canonical JSON for cache keys.
"""

# Importing each filter module registers its types with query.filters.base's parser.
from strata.query.filters import expression, extracted  # noqa: F401
from strata.query.filters.base import Filter, parse_filter
from strata.query.filters.logical import AndFilter, FalseFilter, NotFilter, OrFilter, TrueFilter
from strata.query.filters.match import EqualsFilter, InFilter, NullFilter, SelectorFilter
from strata.query.filters.ranges import BoundFilter, IntervalFilter, RangeFilter
from strata.query.filters.text import LikeFilter, RegexFilter, SearchFilter

__all__ = [
    "AndFilter",
    "BoundFilter",
    "EqualsFilter",
    "FalseFilter",
    "Filter",
    "InFilter",
    "IntervalFilter",
    "LikeFilter",
    "NotFilter",
    "NullFilter",
    "OrFilter",
    "RangeFilter",
    "RegexFilter",
    "SearchFilter",
    "SelectorFilter",
    "TrueFilter",
    "parse_filter",
]
