"""Counts and first/last row times answered from what historicals announce, asking no data node.

Historicals announce each segment with its exact row count and first/last row time (read from
its Parquet footer at load, see `timeline.row_facts`). An unfiltered `count` over segments read
whole needs nothing else: the broker builds the per-segment partials a historical would have
sent (`__segment`, `__bucket` = first row time, the count) and merges them with the rest as
usual, so the answer is the scatter path's, byte for byte. On a small machine the two HTTP hops
and three processes waiting for cores cost several times the count itself.

Only exactly answerable segments are taken: the query is a timeseries of `count` and long/double
min/max of `__time` (post-aggregators allowed) at granularity `all`, without filter, virtual
columns, a query dataSource or `bySegment`; the segment is served only by historicals that
announced the same facts, appears once in the plan, and its rows all lie inside the interval it
is read under. Every other segment goes to the data nodes. Pure logic, no I/O.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import TypeGuard

import pyarrow as pa

from broker_service.segment_plan import SegmentTask
from query import Query
from query.aggregators import Aggregator
from query.aggregators.simple import CountAggregator, NumericAggregator
from query.columns import TIME_COLUMN
from query.timeseries import TimeseriesQuery
from timeline import Interval, RowFacts


def metadata_answerable(query: Query) -> TypeGuard[TimeseriesQuery]:
    """Whether the query's shape lets announced row counts answer it (segments aside)."""
    if type(query) is not TimeseriesQuery or query.inner is not None or query.context.by_segment:
        return False
    if query.filter is not None or query.virtual_columns or not query.granularity.is_all:
        return False
    return bool(query.aggregations) and all(_from_facts(a) for a in query.aggregations)


def _from_facts(agg: Aggregator) -> bool:
    """`count`, or the first/last row time as a long or double min/max of `__time`."""
    if type(agg) is CountAggregator:
        return True
    return (
        type(agg) is NumericAggregator
        and agg.field == TIME_COLUMN
        and agg.op in ("min", "max")
        and agg.kind in ("long", "double")
    )


def _value(agg: Aggregator, facts: RowFacts, span: tuple[int, int]) -> int | float:
    if isinstance(agg, CountAggregator):
        return facts.num_rows
    assert isinstance(agg, NumericAggregator)
    value = span[0] if agg.op == "min" else span[1]
    return float(value) if agg.kind == "double" else value


def split_metadata_partials(
    query: TimeseriesQuery, tasks: Sequence[SegmentTask]
) -> tuple[pa.Table | None, list[SegmentTask], int]:
    """The per-segment partials of the segments announced facts answer (None when there are no
    rows to report), the segments left for the data nodes, and how many segments were answered.

    A segment without rows gives no partial row, as a historical's cursor finds no bucket there.
    """
    times = Counter(t.segment_id for t in tasks)
    segments: list[str] = []
    buckets: list[int] = []
    values: list[list[int | float]] = [[] for _ in query.aggregations]
    rest: list[SegmentTask] = []
    for task in tasks:
        facts = task.selector.row_facts
        if facts is None or times[task.segment_id] > 1:
            rest.append(task)
            continue
        span = facts.time_span
        if span is None:
            continue  # announced empty: nothing to count, nothing to ask
        if not task.descriptor.interval.contains(Interval(span[0], span[1] + 1)):
            rest.append(task)  # read in part: rows outside the interval must not count
            continue
        segments.append(task.segment_id)
        buckets.append(span[0])  # an `all` cursor starts at the first row in the window
        for column, agg in zip(values, query.aggregations, strict=True):
            column.append(_value(agg, facts, span))
    answered = len(tasks) - len(rest)
    if not segments:
        return None, rest, answered
    schema = query.plan.schema()
    arrays = [pa.array(segments, pa.string()), pa.array(buckets, pa.int64())]
    arrays += [pa.array(column, f.type) for column, f in zip(values, list(schema)[2:], strict=True)]
    return pa.Table.from_arrays(arrays, schema=schema), rest, answered
