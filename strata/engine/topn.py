"""topN over segment rows: each segment's best rows per bucket (cut in SQL where SQL ranks alike),
plus a marker for each bucket a cursor walked without a matching row.

Druid cuts each segment to its best `max(threshold, minTopNThreshold)` values (the broker's
`TopNQueryQueryToolChest.ThresholdAdjustingQueryRunner` raises the threshold the historicals get,
`TopNQueryEngine` cuts each segment to it). A data node's one merged partial is therefore made of
those per-segment cuts, summed: never a ranking over all its segments, which would answer
differently from per-segment partials (a broker that caches) and depend on which node serves
which segment."""

from __future__ import annotations

from collections.abc import Sequence

import duckdb
import pyarrow as pa

from strata.engine.grouping import cursor_frame, group_rows
from strata.engine.registry import executes
from strata.engine.segment_input import SegmentInput
from strata.engine.topn_codes import coded_merged, coded_partials
from strata.query.topn import TopNQuery


def run_merged(query: TopNQuery, conn: duckdb.DuckDBPyConnection, inputs: Sequence[SegmentInput]) -> pa.Table:
    """The per-segment partials of `inputs` summed into one (less to ship), not cut again: a cut
    over the sums would make the answer depend on the node's share of the segments."""
    coded = coded_merged(query, conn, inputs)
    return coded if coded is not None else query.summed(conn, run_partials(query, conn, inputs))


@executes(TopNQuery, merged=run_merged)
def run_partials(
    query: TopNQuery, conn: duckdb.DuckDBPyConnection, inputs: Sequence[SegmentInput]
) -> pa.Table:
    """Each segment's best `segment_keep` rows per bucket, as Druid's historicals trim them."""
    coded = coded_partials(query, conn, inputs)
    if coded is not None:
        return query.with_markers(coded, cursor_frame(query.granularity, inputs))
    grouped = group_rows(query.plan, conn, inputs, cut=query.cut_sql)
    # cut in DuckDB already: the broker's merge ranks, a partial's row order does not matter
    top = grouped if query.cuts_in_sql else query.top(grouped, query.segment_keep, per_segment=True)
    return query.with_markers(top, cursor_frame(query.granularity, inputs))
