"""Shared helpers for the aggregation query tests: oracles over raw rows and partial merging."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import duckdb
import pyarrow as pa

from strata.engine import run_partials, run_to_json
from strata.engine.segment_input import SegmentInput
from strata.query import parse_query
from strata.query.base import Query
from tests.query.segment_fixtures import wikipedia_rows


def oracle(sql: str, table: pa.Table | None = None) -> list[tuple[Any, ...]]:
    """Run SQL over the raw rows (table `raw`, `__time` a UTC timestamp)."""
    conn = duckdb.connect()
    conn.execute("SET TimeZone='UTC'")
    conn.register("raw", wikipedia_rows() if table is None else table)
    return conn.execute(sql).fetchall()


def run(query: dict[str, Any], inputs: Sequence[SegmentInput]) -> list[Any]:
    return run_to_json(parse_query(query), inputs)


def run_split(query: dict[str, Any], inputs: Sequence[SegmentInput], parts: int = 3) -> list[Any]:
    """Same query, partials computed in `parts` separate calls, then merged and finalized."""
    q: Query = parse_query(query)
    chunks = [list(inputs[i::parts]) for i in range(parts)]
    partials = [run_partials(q, c) for c in chunks if c]
    return q.finalize(q.merge(partials))
