"""timeseries over segment rows: grouped by time bucket, empty buckets zero-filled as Druid's cursors.

Segments whose count/min/max the Parquet footer answers skip the scan (`footer_answers`)."""

from __future__ import annotations

from collections.abc import Sequence

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from query.aggregation_engine import BUCKET
from query.base import SEGMENT_COLUMN
from query.timeseries import TimeseriesQuery
from segment_engine.footer_answers import split_footer_partials
from segment_engine.grouping import cursor_frame, group_merged, group_rows
from segment_engine.registry import executes
from segment_engine.segment_input import SegmentInput


def _buckets_to_fill(query: TimeseriesQuery, inputs: Sequence[SegmentInput]) -> pa.Table | None:
    """Every (segment, bucket) the cursors walk, which Druid zero-fills; None when nothing is filled."""
    if query.context.skip_empty_buckets or query.granularity.is_none:
        return None  # `none` would fill every millisecond: only buckets with rows
    frame = cursor_frame(query.granularity, inputs)
    return frame if frame.num_rows else None


def run_merged(
    query: TimeseriesQuery, conn: duckdb.DuckDBPyConnection, inputs: Sequence[SegmentInput]
) -> pa.Table:
    plan = query.plan
    from_footers, rest = split_footer_partials(plan, inputs)
    table = group_merged(plan, conn, rest) if rest or from_footers is None else plan.empty()
    if from_footers is not None:
        table = plan.merge(conn, [from_footers, table])
    frame = _buckets_to_fill(query, inputs)
    if frame is None:
        return table
    # every bucket a segment's cursor walks, as null intermediates: merge fills them as it
    # fills the per-segment partials' empty buckets
    schema = plan.schema()
    buckets = pc.unique(frame.column(BUCKET))
    empty = pa.table(
        {f.name: buckets if f.name == BUCKET else pa.nulls(len(buckets), f.type) for f in schema},
        schema=schema,
    )
    return plan.merge(conn, [table, empty])


@executes(TimeseriesQuery, merged=run_merged)
def run_partials(
    query: TimeseriesQuery, conn: duckdb.DuckDBPyConnection, inputs: Sequence[SegmentInput]
) -> pa.Table:
    plan = query.plan
    from_footers, rest = split_footer_partials(plan, inputs)
    table = group_rows(plan, conn, rest) if rest or from_footers is None else plan.empty()
    if from_footers is not None:
        table = pa.concat_tables([from_footers, table])
    frame = _buckets_to_fill(query, inputs)
    if frame is None:
        return table
    filled = frame.join(table.drop_columns([]), keys=[SEGMENT_COLUMN, BUCKET], join_type="full outer")
    schema = plan.schema()
    return filled.select(schema.names).cast(schema)
