"""topN over segment rows: each segment's best rows per bucket (cut in SQL where SQL ranks alike),
plus a marker for each bucket a cursor walked without a matching row."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

import duckdb
import pyarrow as pa

from strata.engine.grouping import cursor_frame, group_merged, group_rows
from strata.engine.registry import executes
from strata.engine.segment_input import SegmentInput
from strata.engine.topn_codes import coded_merged, coded_partials
from strata.query.topn import TopNQuery


def run_merged(query: TopNQuery, conn: duckdb.DuckDBPyConnection, inputs: Sequence[SegmentInput]) -> pa.Table:
    """Ranks over all of `inputs` at once: exact, where per-segment trimming may drop values."""
    grouped = coded_merged(query, conn, inputs)
    if grouped is None:
        grouped = group_merged(query.plan, conn, inputs, cut=partial(query.cut_sql, per_segment=False))
    top = query.cut(grouped, query.segment_keep)
    return query.with_markers(top, cursor_frame(query.granularity, inputs), per_segment=False)


@executes(TopNQuery, merged=run_merged)
def run_partials(
    query: TopNQuery, conn: duckdb.DuckDBPyConnection, inputs: Sequence[SegmentInput]
) -> pa.Table:
    """Each segment's best `segment_keep` rows per bucket, as Druid's historicals trim them."""
    coded = coded_partials(query, conn, inputs)
    if coded is not None:
        return query.with_markers(coded, cursor_frame(query.granularity, inputs), per_segment=True)
    grouped = group_rows(query.plan, conn, inputs, cut=partial(query.cut_sql, per_segment=True))
    # cut in DuckDB already: the broker's merge ranks, a partial's row order does not matter
    top = grouped if query.cuts_in_sql else query.top(grouped, query.segment_keep, per_segment=True)
    return query.with_markers(top, cursor_frame(query.granularity, inputs), per_segment=True)
