"""timeseries over segment rows: grouped by time bucket, empty buckets zero-filled as Druid's cursors.

Segments whose count/min/max the Parquet footer answers skip the scan (`footer_answers`), and so
do those whose counts and sums Arrow's kernels take from their mapped columns (`column_sums`)."""

from __future__ import annotations

from collections.abc import Sequence

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from strata.engine.column_sums import split_summed_partials
from strata.engine.footer import footer_parsed, one_look_per_file
from strata.engine.footer_answers import answerable, split_footer_partials
from strata.engine.grouping import cursor_frame, group_merged, group_rows
from strata.engine.memory_source import is_memory
from strata.engine.registry import executes
from strata.engine.segment_input import SegmentInput
from strata.query.aggregation_engine import BUCKET
from strata.query.base import SEGMENT_COLUMN
from strata.query.timeseries import TimeseriesQuery


def _buckets_to_fill(query: TimeseriesQuery, inputs: Sequence[SegmentInput]) -> pa.Table | None:
    """Every (segment, bucket) the cursors walk, which Druid zero-fills; None when nothing is filled."""
    if query.context.skip_empty_buckets:
        return None
    frame = cursor_frame(query.granularity, inputs)
    return frame if frame.num_rows else None


def _unscanned_partials(
    query: TimeseriesQuery, inputs: Sequence[SegmentInput]
) -> tuple[pa.Table | None, list[SegmentInput]]:
    """Per-segment partials of the inputs answered without a scan (footers, then column sums)
    and the inputs left to scan."""
    from_footers, rest = split_footer_partials(query.plan, inputs)
    summed, rest = split_summed_partials(query.plan, rest)
    if from_footers is None or summed is None:
        return from_footers if summed is None else summed, rest
    return pa.concat_tables([from_footers, summed]), rest


def run_merged(
    query: TimeseriesQuery, conn: duckdb.DuckDBPyConnection, inputs: Sequence[SegmentInput]
) -> pa.Table:
    plan = query.plan
    unscanned, rest = _unscanned_partials(query, inputs)
    table = group_merged(plan, conn, rest) if rest or unscanned is None else plan.empty()
    if unscanned is not None:
        table = plan.merge(conn, [unscanned, table])
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
    unscanned, rest = _unscanned_partials(query, inputs)
    table = group_rows(plan, conn, rest) if rest or unscanned is None else plan.empty()
    if unscanned is not None:
        table = pa.concat_tables([unscanned, table])
    frame = _buckets_to_fill(query, inputs)
    if frame is None:
        return table
    schema = plan.schema()
    if _covers(table, frame):  # nothing to fill: an Arrow join (thread pool, ~1 ms) would add no row
        return table.select(schema.names).cast(schema)
    filled = frame.join(table.drop_columns([]), keys=[SEGMENT_COLUMN, BUCKET], join_type="full outer")
    return filled.select(schema.names).cast(schema)


def _covers(table: pa.Table, frame: pa.Table) -> bool:
    """Whether `table`'s (segment, bucket) keys are exactly `frame`'s (one each): the fill adds no row.

    Both sorted and compared in Arrow (a Python set of 100 keys cost ~0.2 ms, more than the answer).
    """
    if table.num_rows != frame.num_rows:
        return False
    keys = [(SEGMENT_COLUMN, "ascending"), (BUCKET, "ascending")]
    ours = table.select([SEGMENT_COLUMN, BUCKET]).sort_by(keys)
    wanted = frame.select([SEGMENT_COLUMN, BUCKET]).sort_by(keys)
    return all(ours.column(c).equals(wanted.column(c)) for c in (SEGMENT_COLUMN, BUCKET))


def footer_partials(query: TimeseriesQuery, inputs: Sequence[SegmentInput]) -> pa.Table | None:
    """The per-segment partials when footers parsed before answer every input whole, with no
    bucket left to zero-fill; None otherwise (run the query). No file is read here, only stat'ed:
    cheap enough for a data node to answer on its event loop, without a hop to a worker thread."""
    if not inputs or not answerable(query.plan):
        return None
    if not all(not is_memory(i.path) and footer_parsed(i.path) for i in inputs):
        return None
    with one_look_per_file():
        table, rest = split_footer_partials(query.plan, inputs)
        if rest or table is None:
            return None
        frame = _buckets_to_fill(query, inputs)
    if frame is not None and not _covers(table, frame):
        return None
    return table
