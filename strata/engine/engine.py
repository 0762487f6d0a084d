"""Entry points a data node uses to answer a query over its segments.

These are CPU-bound and block: services call them from a worker thread, never the event loop
(except `broker_partials_from_footers`, which reads no file).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import duckdb
import pyarrow as pa

from strata.engine.footer import one_look_per_file
from strata.engine.lookup_tables import query_lookups, registered_lookups
from strata.engine.mapped_source import request_views
from strata.engine.registry import merged, partials
from strata.engine.segment_input import SegmentInput
from strata.engine.timeseries import footer_partials
from strata.engine.wrapped_source import registered_inline
from strata.query.base import Query
from strata.query.duck import connection
from strata.query.errors import QueryUnsupported
from strata.query.timeseries import TimeseriesQuery


def require_table_source(query: Query) -> None:
    """Data nodes read tables; a query dataSource is the broker's (as in Druid)."""
    if query.inner is not None:
        raise QueryUnsupported("A query dataSource is answered by the broker, not by a data node")


def run_partials(query: Query, inputs: Sequence[SegmentInput]) -> pa.Table:
    """Per-segment partial results, labelled by `__segment` (what the broker caches and merges)."""
    require_table_source(query)
    conn = connection()
    with one_look_per_file(), request_views(), _sources(conn, query):
        return partials(query, conn, inputs)


def run_merged(query: Query, inputs: Sequence[SegmentInput]) -> pa.Table:
    """The merged partial of `inputs` (`__segment` null), in one pass where the type can."""
    require_table_source(query)
    conn = connection()
    with one_look_per_file(), request_views(), _sources(conn, query):
        return merged(query, conn, inputs)


@contextlib.contextmanager
def _sources(conn: duckdb.DuckDBPyConnection, query: Query) -> Iterator[None]:
    """A join's inline right sides and the lookups the query reads, visible to `conn`."""
    with registered_inline(conn, query.source), registered_lookups(conn, query_lookups(query)):
        yield


def run_for_broker(query: Query, inputs: Sequence[SegmentInput]) -> pa.Table:
    """What a broker gets: per-segment partials where it may cache them or asked for bySegment,
    else (a type that allows it) one merged partial with `__segment` null, far less to ship and merge.
    """
    wanted = query.segment_cacheable and query.context.per_segment_partials
    if query.node_may_merge and not wanted and not query.context.by_segment:
        return run_merged(query, inputs)
    return run_partials(query, inputs)


def broker_partials_from_footers(query: Query, inputs: Sequence[SegmentInput]) -> pa.Table | None:
    """What `run_for_broker` returns, when footers already parsed answer it without reading a row
    (an unfiltered count, min or max); None otherwise. Safe to call on an event loop: no file is
    opened, so a data node answers the commonest dashboard query without a thread hop.
    """
    if type(query) is not TimeseriesQuery or not query.plain_table:
        return None
    return footer_partials(query, inputs)


def run_to_json(query: Query, inputs: Sequence[SegmentInput]) -> list[Any]:
    """The merged, finalised Druid response over `inputs` (a data node answering a plain client)."""
    return query.finalize(run_merged(query, inputs))
