"""Timeseries partials summed straight over a segment's memory-mapped Arrow columns.

When each segment read whole falls in one bucket (hourly segments under `hour`, any segment
under `all`), an unfiltered timeseries of `count` and `longSum`/`doubleSum` groups nothing: a
segment's partial is its row count and one sum per column. Arrow's kernels sum a mapped column
without the per-row grouping a scan pays (a DuckDB pass over 48 such segments of 100,000 rows
cost a historical ~120 ms of CPU; these sums a few ms). The bucket comes from the footer, as in
`footer_answers`.

Only what the sums reproduce exactly is taken, segment by segment; the rest is scanned:
- a `longSum` of a 64-bit integer column whose values cannot overflow a 64-bit total (the
  scan's `CAST(sum(..) AS BIGINT)` would fail; Arrow's sum would wrap), a `doubleSum` of a
  double column (null when every value is null, as the scan's; the order of floating-point
  additions is the engine's own either way), `count`, and `longMin`/`longMax` of an integer
  column;
- columns typed alike across the request (the scan casts otherwise), no expression inputs;
- segments of at least `MIN_ROWS` rows with an Arrow copy (`mapped_source`), read once in the
  request.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from strata.engine.footer import Footer
from strata.engine.footer_answers import Counted, NoAnswer, SegmentAnswer, bucketed_answer, segment_partials
from strata.engine.mapped_source import mapped
from strata.engine.segment_input import SegmentInput, read_schema, unified_types
from strata.query.aggregation_engine import GroupingPlan
from strata.query.aggregators import Aggregator
from strata.query.aggregators.simple import CountAggregator, NumericAggregator
from strata.query.columns import TIME_COLUMN

_INT64_LIMIT = 2**63 - 1
# Below this many rows a segment is scanned: the sums' fixed cost per segment (footer, copy and a
# kernel call per column, ~0.1 ms) outweighs the scan's per-row one, which DuckDB spreads over
# many segments in one pass (in process, 100 segments of 30,000 rows: 18 ms of CPU summed against
# 26 ms scanned; 500 of 8,000: 65-70 against 43-46 ms)
MIN_ROWS = 32_768


SUMMED = Counted()


def summable(plan: GroupingPlan) -> bool:
    """Whether the query shape can be summed per segment: unfiltered, no dimensions, count and
    long/double sums (long min/max beside them)."""
    if plan.filter is not None or plan.dimensions or plan.granularity.is_none or plan.source is not None:
        return False
    if plan.virtual_columns.needed(plan.input_columns()):
        return False
    return all(_summable(a) for a in plan.aggregators)


def _summable(agg: Aggregator) -> bool:
    if type(agg) is CountAggregator:
        return True
    if type(agg) is not NumericAggregator or agg.field == TIME_COLUMN:
        return False
    return (agg.op == "sum" and agg.kind in ("long", "double")) or (agg.kind == "long" and agg.op != "sum")


def split_summed_partials(
    plan: GroupingPlan, inputs: Sequence[SegmentInput]
) -> tuple[pa.Table | None, list[SegmentInput]]:
    """Per-segment partials of the inputs summed here (None: none were), and the rest to scan.

    The partials have the shape `group_rows` gives (`__segment`, `__bucket`, intermediates); a
    segment without rows gives no row, as a scan finds no group there.
    """
    if not inputs or not summable(plan):
        return None, list(inputs)
    copies = {}  # first the one cheap test, so 50,000 tiny segments cost next to nothing here
    for inp in inputs:
        rows = mapped(inp.path)
        if rows is not None and rows.table.num_rows >= MIN_ROWS:
            copies[inp.path] = rows.table
    if not copies:
        return None, list(inputs)
    fields = [a.field for a in plan.aggregators if isinstance(a, NumericAggregator)]
    types = unified_types([read_schema(i.path) for i in inputs], fields) if fields else {}
    return segment_partials(
        plan, inputs, lambda inp: _segment_sums(plan, inp, copies.get(inp.path), types), SUMMED
    )


def _segment_sums(
    plan: GroupingPlan, inp: SegmentInput, table: pa.Table | None, types: Mapping[str, str]
) -> SegmentAnswer | None:
    """(bucket, intermediates) of one segment from its copy `table` (bucket None: no rows), or
    None: scan it."""
    if table is None:
        return None

    def row(footer: Footer) -> list[Any]:
        if table.num_rows != footer.num_rows:
            raise NoAnswer  # not the copy of this file: let the scan report it
        return [_value(a, table, footer, types) for a in plan.aggregators]

    return bucketed_answer(plan, inp, row)


def _value(agg: Aggregator, table: pa.Table, footer: Footer, types: Mapping[str, str]) -> Any:
    if isinstance(agg, CountAggregator):
        return table.num_rows
    assert isinstance(agg, NumericAggregator)
    wanted = "BIGINT" if agg.kind == "long" else "DOUBLE"
    if types.get(agg.field) != wanted:
        raise NoAnswer  # missing everywhere, or typed otherwise somewhere: the scan casts
    if agg.field not in table.column_names:
        return None  # a column this segment lacks is all-null: no value to sum or compare
    column = table.column(agg.field)
    if not (pa.types.is_int64(column.type) if agg.kind == "long" else pa.types.is_float64(column.type)):
        raise NoAnswer
    if agg.op != "sum":
        return pc.min_max(column)["min" if agg.op == "min" else "max"].as_py()
    if agg.kind == "long":
        stats = footer.column_stats(agg.field)  # the file's own statistics: no pass over the rows
        if stats is None or stats.low is None or stats.high is None:
            bounds = pc.min_max(column)
            low, high = bounds["min"].as_py(), bounds["max"].as_py()
        else:
            low, high = int(stats.low), int(stats.high)
        if low is not None and max(-low, high) * (len(column) - column.null_count) > _INT64_LIMIT:
            raise NoAnswer  # the total might not fit a BIGINT: the scan raises its error
    return pc.sum(column, min_count=1).as_py()
