"""Druid's native query language, shared by the broker and the data nodes.

`parse_query` turns query JSON into an immutable typed object; each query type knows how to compute
per-segment partials (DuckDB over Parquet), merge partials (Arrow), and finalize into Druid's
response shape. Errors are `query.errors.QueryError`s carrying Druid's error body and status.
"""

from query.base import SEGMENT_COLUMN, CommonFields, Query, parse_query, query_types, register
from query.context import QueryContext
from query.errors import QueryError
from query.segment_input import SegmentInput

__all__ = [
    "SEGMENT_COLUMN",
    "CommonFields",
    "Query",
    "QueryContext",
    "QueryError",
    "SegmentInput",
    "parse_query",
    "query_types",
    "register",
]
