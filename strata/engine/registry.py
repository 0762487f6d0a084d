"""Which code reads a query type's segment rows: executors registered by query class.

Each query type of `query` (the language: parse, plan, merge, finalise) has one executor here that
computes its per-segment partials over a request's segments, and optionally its merged partial in
the same pass. Modules register theirs on import; the package's `__init__` imports them all.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import duckdb
import pyarrow as pa

from strata.engine.segment_input import SegmentInput
from strata.query.base import Query
from strata.query.errors import QueryUnsupported

Run = Callable[[Any, duckdb.DuckDBPyConnection, Sequence[SegmentInput]], pa.Table]
Q = TypeVar("Q", bound=Query)


@dataclass(frozen=True)
class Executor:
    partials: Run  # per-segment partials in one pass, labelled by `__segment`
    merged: Run | None = None  # what `merge` makes of them, grouped across segments in one pass


_EXECUTORS: dict[type[Query], Executor] = {}


def executes(
    query_class: type[Q],
    merged: Callable[[Q, duckdb.DuckDBPyConnection, Sequence[SegmentInput]], pa.Table] | None = None,
) -> Callable[
    [Callable[[Q, duckdb.DuckDBPyConnection, Sequence[SegmentInput]], pa.Table]],
    Callable[[Q, duckdb.DuckDBPyConnection, Sequence[SegmentInput]], pa.Table],
]:
    """Registers the decorated function as `query_class`'s partials (and `merged`, if given)."""

    def register(
        partials: Callable[[Q, duckdb.DuckDBPyConnection, Sequence[SegmentInput]], pa.Table],
    ) -> Callable[[Q, duckdb.DuckDBPyConnection, Sequence[SegmentInput]], pa.Table]:
        _EXECUTORS[query_class] = Executor(partials, merged)
        return partials

    return register


def executor(query: Query) -> Executor:
    found = _EXECUTORS.get(type(query))
    if found is None:
        raise QueryUnsupported(f"Query type [{query.query_type}] has no segment executor")
    return found


def partials(query: Query, conn: duckdb.DuckDBPyConnection, inputs: Sequence[SegmentInput]) -> pa.Table:
    """Per-segment partial results of `query` over `inputs`, labelled by `__segment`."""
    return executor(query).partials(query, conn, inputs)


def merged(query: Query, conn: duckdb.DuckDBPyConnection, inputs: Sequence[SegmentInput]) -> pa.Table:
    """What `query.merge` makes of the partials of `inputs`, in one pass where the type can."""
    run = executor(query)
    if run.merged is not None:
        return run.merged(query, conn, inputs)
    return query.merge([run.partials(query, conn, inputs)])
