"""groupBy over segment rows: the grouping plan per segment, or across segments in one pass."""

from __future__ import annotations

from collections.abc import Sequence

import duckdb
import pyarrow as pa

from strata.engine.groupby_codes import coded_groups
from strata.engine.grouping import group_merged, group_rows
from strata.engine.registry import executes
from strata.engine.segment_input import SegmentInput
from strata.query.groupby import GroupByQuery


def run_merged(
    query: GroupByQuery, conn: duckdb.DuckDBPyConnection, inputs: Sequence[SegmentInput]
) -> pa.Table:
    """One grouping across `inputs` (on dictionary codes where the Arrow copies allow it), cut to the
    groups the limitSpec may keep where Druid pushes the limit down to data nodes."""
    coded = coded_groups(query, conn, inputs)
    return query.node_cut(coded if coded is not None else group_merged(query.plan, conn, inputs))


@executes(GroupByQuery, merged=run_merged)
def run_partials(
    query: GroupByQuery, conn: duckdb.DuckDBPyConnection, inputs: Sequence[SegmentInput]
) -> pa.Table:
    return group_rows(query.plan, conn, inputs)
