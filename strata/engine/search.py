"""search over segment rows: counts of the values of each searched dimension that match the spec."""

from __future__ import annotations

from collections.abc import Sequence

import duckdb
import numpy as np
import pyarrow as pa

from strata.engine.registry import executes
from strata.engine.relation import filtered_relation
from strata.engine.segment_input import SegmentInput, read_schema
from strata.query.base import SEGMENT_COLUMN
from strata.query.columns import TIME_COLUMN
from strata.query.duck import quote_str
from strata.query.filters.sql import as_text
from strata.query.search import BUCKET, PARTIAL_SCHEMA, SearchDimension, SearchQuery, sum_counts


def searched_dimensions(query: SearchQuery, inputs: Sequence[SegmentInput]) -> list[SearchDimension]:
    """The query's dimensions, or else every dimension of the segments (Druid's default)."""
    if query.dimensions is not None:
        return list(query.dimensions)
    names: dict[str, None] = {}
    for inp in inputs:
        names.update(dict.fromkeys(read_schema(inp.path).dimensions))
    return [SearchDimension(n, n) for n in names if n != TIME_COLUMN]


@executes(SearchQuery)
def run_partials(
    query: SearchQuery, conn: duckdb.DuckDBPyConnection, inputs: Sequence[SegmentInput]
) -> pa.Table:
    dims = searched_dimensions(query, inputs)
    if not inputs or not dims:
        return PARTIAL_SCHEMA.empty_table()
    relation, types = filtered_relation(inputs, [d.column for d in dims], query.filter, source=query.source)
    if query.granularity.is_all:
        starts = " ".join(f"WHEN {quote_str(i.segment_id)} THEN {i.interval.start}" for i in inputs)
        time_key = f"CASE {SEGMENT_COLUMN} {starts} END"
    else:
        time_key = TIME_COLUMN
    branches = []
    for d in dims:
        text = as_text(types, d.column)
        branches.append(
            f"SELECT {SEGMENT_COLUMN}, {time_key} AS {BUCKET}, {quote_str(d.output_name)} AS dimension, "
            f"{text} AS value, count(*) AS count FROM rows WHERE {query.spec.to_sql(text)} GROUP BY ALL"
        )
    sql = f"WITH rows AS ({relation}) " + " UNION ALL ".join(branches)
    table = conn.sql(sql).to_arrow_table().cast(PARTIAL_SCHEMA)
    if not query.granularity.is_all and table.num_rows:
        buckets = query.granularity.bucket_starts(table.column(BUCKET).to_numpy())
        table = table.set_column(1, BUCKET, pa.array(np.asarray(buckets, np.int64)))
        table = sum_counts(table, [SEGMENT_COLUMN, BUCKET, "dimension", "value"])
    return table
