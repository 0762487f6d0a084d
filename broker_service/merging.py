"""What the broker's merge step runs: gathered partials merged, bounded and finalized, as rows
and JSON or as the answer's bytes alone. Plain top-level functions, so a merge worker process can
be handed them by name."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from strata.query import Query
from strata.query.errors import ResourceLimitExceeded
from strata.query.scan import ScanQuery
from strata.server.json_response import encode_json
from strata.sql.arrow_answer import SqlAnswer


def merge_and_finalize(
    query: Query, partials: list[pa.Table], max_rows: int, one_node_merged: bool = False
) -> tuple[list[Any], bytes]:
    """The merged, finalized rows and their JSON (`one_node_merged`: see `Query.merge_gathered`)."""
    results = query.finalize(_merged(query, partials, max_rows, one_node_merged))
    return results, encode_json(results)


def scan_table(query: ScanQuery, partials: list[pa.Table], max_rows: int) -> pa.Table:
    """A scan's merged partials, as `finalize` takes them (`ScanQuery.answer_table`: its rows)."""
    return _merged(query, partials, max_rows, one_node_merged=False)


def merge_and_encode(
    query: Query,
    partials: list[pa.Table],
    max_rows: int,
    one_node_merged: bool = False,
    write: SqlAnswer | None = None,
) -> bytes:
    """The answer's JSON only, which a type may write without making its rows (a merge worker's
    answer: rows as Python objects would cost as much to send back as to make); `write`: the SQL
    statement's body instead."""
    merged = _merged(query, partials, max_rows, one_node_merged)
    return query.finalize_json(merged) if write is None else write.body(query, merged)


def _merged(query: Query, partials: list[pa.Table], max_rows: int, one_node_merged: bool) -> pa.Table:
    merged = query.merge_gathered(partials, one_node_merged=one_node_merged)
    if merged.num_rows > max_rows:
        raise ResourceLimitExceeded(
            f"Query [{query.context.query_id}] result has {merged.num_rows} rows, "
            f"over the limit of {max_rows}"
        )
    return merged
