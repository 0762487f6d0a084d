"""timeBoundary and dataSourceMetadata over segments: each segment's first and last row time,
from the Parquet footer when unfiltered and the whole segment is read, else by a scan."""

from __future__ import annotations

from collections.abc import Sequence

import duckdb
import pyarrow as pa

from strata.engine.footer import time_span
from strata.engine.memory_source import is_memory
from strata.engine.registry import executes
from strata.engine.relation import filtered_relation
from strata.engine.segment_input import SegmentInput
from strata.query.base import SEGMENT_COLUMN
from strata.query.columns import TIME_COLUMN
from strata.query.datasource_metadata import DataSourceMetadataQuery
from strata.query.filters import Filter
from strata.query.time_boundary import MAX_TIME, MIN_TIME, TimeBoundaryQuery


def time_extremes(
    conn: duckdb.DuckDBPyConnection, inputs: Sequence[SegmentInput], flt: Filter | None
) -> pa.Table:
    """One row per segment holding matching rows: its first and last `__time`.

    Unfiltered, a segment whose footer statistics lie inside the part to read is answered from
    them without reading a row (dashboards ask timeBoundary on every load).
    """
    known: dict[str, tuple[int, int]] = {}
    if flt is None:
        for i in inputs:
            span = footer_time_span(i.path)
            if span is not None and i.interval.start <= span[0] and span[1] < i.interval.end:
                known[i.segment_id] = span
    rest = [i for i in inputs if i.segment_id not in known]
    from_stats = pa.table(
        {
            SEGMENT_COLUMN: pa.array(list(known), pa.string()),
            MIN_TIME: pa.array([lo for lo, _ in known.values()], pa.int64()),
            MAX_TIME: pa.array([hi for _, hi in known.values()], pa.int64()),
        }
    )
    if not rest:
        return from_stats
    relation, _ = filtered_relation(rest, [], flt)
    sql = (
        f"SELECT {SEGMENT_COLUMN}, min({TIME_COLUMN}) AS {MIN_TIME}, max({TIME_COLUMN}) AS {MAX_TIME} "
        f"FROM ({relation}) GROUP BY {SEGMENT_COLUMN}"
    )
    scanned = conn.sql(sql).to_arrow_table()
    return pa.concat_tables([from_stats, scanned.cast(from_stats.schema)]) if known else scanned


def footer_time_span(path: str) -> tuple[int, int] | None:
    """First and last `__time` (epoch ms) from the Parquet statistics (footers parsed once per file)."""
    if is_memory(path):
        return None
    try:
        return time_span(path)
    except (OSError, ValueError):
        return None


@executes(TimeBoundaryQuery)
def time_boundary_partials(
    query: TimeBoundaryQuery, conn: duckdb.DuckDBPyConnection, inputs: Sequence[SegmentInput]
) -> pa.Table:
    return time_extremes(conn, inputs, query.filter)


@executes(DataSourceMetadataQuery)
def datasource_metadata_partials(
    query: DataSourceMetadataQuery, conn: duckdb.DuckDBPyConnection, inputs: Sequence[SegmentInput]
) -> pa.Table:
    return time_extremes(conn, inputs, None)
