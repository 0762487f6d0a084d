"""Timeseries partials read from Parquet footers instead of rows: count, min and max.

An unfiltered timeseries whose aggregators are only `count` and `long`/`double` `Min`/`Max`
needs no row of a segment read whole: the count is the footer's row count, a min or max is the
column's statistics over its row groups (which skip nulls, as the aggregators do), and the
bucket is known from the `__time` statistics. Such a segment's partial costs a cached footer
lookup instead of a scan; dashboards ask "how many rows" and "since when" on every load.

Anything the statistics cannot answer exactly is left to the scan, segment by segment:
floating-point columns (statistics skip NaN, which `max` returns, and may write -0.0 for 0.0),
a row group without statistics, a segment read in part or under several intervals, live
(in-memory) segments, columns typed differently across the request.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pyarrow as pa

from strata.engine.footer import Footer, read_footer
from strata.engine.memory_source import is_memory
from strata.engine.segment_input import SegmentInput, read_schema, unified_types
from strata.query.aggregation_engine import GroupingPlan, agg_col
from strata.query.aggregators import Aggregator
from strata.query.aggregators.simple import CountAggregator, NumericAggregator
from strata.query.columns import TIME_COLUMN
from timeline import Interval, RowFacts


class Counted:
    """How many segment partials a path answered without a scan (tests prove the skip with it)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.segments = 0

    def add(self, n: int) -> None:
        with self._lock:
            self.segments += n


ANSWERED = Counted()
SegmentAnswer = tuple[int | None, list[Any]]  # (bucket, intermediates); bucket None: no rows


def answerable(plan: GroupingPlan) -> bool:
    """Whether the query shape can come from footers: unfiltered, no dimensions, count/min/max."""
    if plan.filter is not None or plan.dimensions or plan.granularity.is_none or plan.source is not None:
        return False
    if plan.virtual_columns.needed(plan.input_columns()):
        return False  # an aggregator reads an expression, not a stored column
    return all(
        type(a) is CountAggregator or (type(a) is NumericAggregator and a.op in ("min", "max"))
        for a in plan.aggregators
    )


def split_footer_partials(
    plan: GroupingPlan, inputs: Sequence[SegmentInput]
) -> tuple[pa.Table | None, list[SegmentInput]]:
    """Per-segment partials of the inputs answerable from footers (None: none were), and the rest.

    The partials have the shape `group_rows` gives (`__segment`, `__bucket`, intermediates); a
    segment without rows gives no row, as a scan finds no group there.
    """
    if not answerable(plan) or not inputs:
        return None, list(inputs)
    fields = [
        a.field for a in plan.aggregators if isinstance(a, NumericAggregator) and a.field != TIME_COLUMN
    ]
    types = unified_types([read_schema(i.path) for i in inputs], fields) if fields else {}
    return segment_partials(
        plan, inputs, lambda inp: None if is_memory(inp.path) else _segment_answer(plan, inp, types), ANSWERED
    )


def segment_partials(
    plan: GroupingPlan,
    inputs: Sequence[SegmentInput],
    answer: Callable[[SegmentInput], SegmentAnswer | None],
    counted: Counted,
) -> tuple[pa.Table | None, list[SegmentInput]]:
    """The partials (`group_rows`' shape) of the inputs `answer` answers, and the rest to scan.

    A segment read under several intervals is scanned (its rows are read per interval); one
    without rows gives no row, as a scan finds no group there.
    """
    times = Counter(i.segment_id for i in inputs)
    segments: list[str] = []
    buckets: list[int] = []
    values: list[list[Any]] = [[] for _ in plan.aggregators]
    rest: list[SegmentInput] = []
    answered = 0
    for inp in inputs:
        found = answer(inp) if times[inp.segment_id] == 1 else None
        if found is None:
            rest.append(inp)
            continue
        answered += 1
        bucket, row = found
        if bucket is None:
            continue  # no rows: no group, as a scan finds none
        segments.append(inp.segment_id)
        buckets.append(bucket)
        for column, value in zip(values, row, strict=True):
            column.append(value)
    if not answered:
        return None, rest
    counted.add(answered)
    schema = plan.schema()
    arrays = [pa.array(segments, pa.string()), pa.array(buckets, pa.int64())]
    arrays += [pa.array(column, schema.field(agg_col(i)).type) for i, column in enumerate(values)]
    return pa.Table.from_arrays(arrays, schema=schema), rest


def footer_row_facts(footer: Footer) -> RowFacts | None:
    """The row count and first/last `__time` the footer states exactly; None when it cannot
    (statistics missing, or a null `__time` the statistics would not show)."""
    if footer.num_rows == 0:
        return RowFacts(0, None)
    span = footer.time_span
    time_stats = footer.column_stats(TIME_COLUMN)
    if span is None or time_stats is None or time_stats.null_count:
        return None
    return RowFacts(footer.num_rows, span)


def row_facts(path: str) -> RowFacts | None:
    """What a historical announces of a segment file it loaded (None: unreadable or inexact)."""
    try:
        return footer_row_facts(read_footer(path))
    except (OSError, ValueError):
        return None


class NoAnswer(Exception):
    """This segment's partial cannot be answered exactly without a scan: scan it."""


def _segment_answer(plan: GroupingPlan, inp: SegmentInput, types: Mapping[str, str]) -> SegmentAnswer | None:
    """(bucket, intermediates) of one segment from its footer (bucket None: no rows), or None: scan."""
    return bucketed_answer(plan, inp, lambda footer: [_value(a, footer, types) for a in plan.aggregators])


def bucketed_answer(
    plan: GroupingPlan, inp: SegmentInput, row: Callable[[Footer], list[Any]]
) -> SegmentAnswer | None:
    """(bucket, `row(footer)`) of a segment read whole whose rows all fall in one bucket,
    (None, []) for one without rows; None when it must be scanned (so too when `row` raises
    NoAnswer)."""
    try:
        footer = read_footer(inp.path)
    except (OSError, ValueError):
        return None  # let the scan report it
    facts = footer_row_facts(footer)
    if facts is None:
        return None
    span = facts.time_span
    if span is None:
        return None, []
    if not inp.interval.contains(Interval(span[0], span[1] + 1)):
        return None  # read in part: rows outside the window must not count
    granularity = plan.granularity
    if granularity.is_all:
        bucket = span[0]  # the cursor window's start: the first row's time
    else:
        bucket = granularity.bucket_start(span[0])
        if granularity.bucket_start(span[1]) != bucket:
            return None  # the rows fall in several buckets
    try:
        return bucket, row(footer)
    except NoAnswer:
        return None


def _value(agg: Aggregator, footer: Footer, types: Mapping[str, str]) -> Any:
    """The intermediate of one count/min/max aggregator from the footer (raises NoAnswer)."""
    if isinstance(agg, CountAggregator):
        return footer.num_rows
    assert isinstance(agg, NumericAggregator)
    if agg.kind == "float":
        raise NoAnswer  # float rounding of a long input: leave it to DuckDB's cast
    if agg.field == TIME_COLUMN:
        stats = footer.column_stats(TIME_COLUMN)
    elif agg.field not in footer.schema.names:
        if types.get(agg.field, "VARCHAR") == "BLOB":
            raise NoAnswer  # the scan reports a sketch column fed to a numeric aggregator
        return None  # a column the segment lacks is all-null: min and max are null
    else:
        column_type = footer.schema.field(agg.field).type
        if not pa.types.is_signed_integer(column_type) or types.get(agg.field) != "BIGINT":
            raise NoAnswer  # floating statistics skip NaN; strings parse per row
        stats = footer.column_stats(agg.field)
    if stats is None:
        raise NoAnswer
    value = stats.low if agg.op == "min" else stats.high
    if value is None:
        return None  # every value null
    return int(value) if agg.kind == "long" else float(value)
