"""timeBoundary and the shared per-segment time extremes it is built on.

Partials hold one row per segment (`__segment`, `minTime`, `maxTime`, epoch ms); merging keeps the
overall extremes in one row, so merge is associative and any mix of cached segments combines.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Self

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from query.base import SEGMENT_COLUMN, CommonFields, Query, register
from query.errors import invalid
from query.filters import Filter, parse_filter
from query.relation import filtered_relation
from query.segment_input import TIME_COLUMN, SegmentInput, to_json_bytes
from timeline import format_instant

if TYPE_CHECKING:
    import duckdb

MIN_TIME = "minTime"
MAX_TIME = "maxTime"
BOUNDS = (MIN_TIME, MAX_TIME)


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


@functools.lru_cache(maxsize=16384)
def footer_time_span(path: str) -> tuple[int, int] | None:
    """First and last `__time` (epoch ms) from the Parquet statistics; segment files never change."""
    try:
        meta = pq.read_metadata(path)
        column = meta.schema.names.index(TIME_COLUMN)
        lows, highs = [], []
        for g in range(meta.num_row_groups):
            stats = meta.row_group(g).column(column).statistics
            if stats is None or not stats.has_min_max:
                return None
            lows.append(stats.min_raw)
            highs.append(stats.max_raw)
    except (OSError, ValueError):
        return None
    if not lows or not all(isinstance(v, int) for v in (*lows, *highs)):
        return None
    return min(lows), max(highs)


def merge_extremes(partials: Sequence[pa.Table]) -> pa.Table:
    tables = [p for p in partials if p.num_rows]
    mins = [pc.min(t.column(MIN_TIME)).as_py() for t in tables]
    maxs = [pc.max(t.column(MAX_TIME)).as_py() for t in tables]
    mins, maxs = [m for m in mins if m is not None], [m for m in maxs if m is not None]
    rows = 1 if mins else 0
    return pa.table(
        {
            SEGMENT_COLUMN: pa.array([None] * rows, pa.string()),
            MIN_TIME: pa.array([min(mins)] if rows else [], pa.int64()),
            MAX_TIME: pa.array([max(maxs)] if rows else [], pa.int64()),
        }
    )


@register
@dataclass(frozen=True, kw_only=True)
class TimeBoundaryQuery(Query):
    query_type = "timeBoundary"
    intervals_required = False

    bound: str | None = None
    filter: Filter | None = None

    @classmethod
    def from_json(cls, obj: Mapping[str, Any], common: CommonFields) -> Self:
        bound = obj.get("bound")
        if bound is not None and bound not in BOUNDS:
            raise invalid("Unknown timeBoundary bound [%s]; expected minTime or maxTime", bound)
        return cls(**common.as_kwargs(), bound=bound, filter=parse_filter(obj.get("filter")))

    def to_json(self) -> dict[str, Any]:
        out = self.common_json()
        out["bound"] = self.bound
        out["filter"] = None if self.filter is None else self.filter.to_json()
        return out

    def cache_key(self) -> bytes:
        spec = {"bound": self.bound, "filter": None if self.filter is None else self.filter.to_json()}
        return self.query_type.encode() + b":" + to_json_bytes(spec)

    def run_partials(self, conn: duckdb.DuckDBPyConnection, inputs: Sequence[SegmentInput]) -> pa.Table:
        return time_extremes(conn, inputs, self.filter)

    def merge(self, partials: Sequence[pa.Table]) -> pa.Table:
        return merge_extremes(partials)

    def finalize(self, merged: pa.Table) -> list[Any]:
        if merged.num_rows == 0:
            return []
        low, high = merged.column(MIN_TIME)[0].as_py(), merged.column(MAX_TIME)[0].as_py()
        if self.bound == MIN_TIME:
            return [{"timestamp": format_instant(low), "result": {MIN_TIME: format_instant(low)}}]
        if self.bound == MAX_TIME:
            return [{"timestamp": format_instant(high), "result": {MAX_TIME: format_instant(high)}}]
        result = {MIN_TIME: format_instant(low), MAX_TIME: format_instant(high)}
        return [{"timestamp": format_instant(low), "result": result}]
