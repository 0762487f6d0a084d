"""Druid's native query language, shared by the broker and the data nodes.

`parse_query` turns query JSON into an immutable typed object; each query type knows how to merge
partials (Arrow) and finalize them into Druid's response shape, and what SQL its pass over segment
rows runs; reading segments is `strata.engine`'s, so the broker merges without it. Errors are
`query.errors.QueryError`s carrying Druid's error body and status.
"""

from strata.query.base import SEGMENT_COLUMN, CommonFields, Query, parse_query, query_types, register
from strata.query.context import QueryContext
from strata.query.errors import QueryError

__all__ = [
    "SEGMENT_COLUMN",
    "CommonFields",
    "Query",
    "QueryContext",
    "QueryError",
    "parse_query",
    "query_types",
    "register",
]
