"""Counts and first/last row times answered from what historicals announce, asking no data node.

Historicals announce each segment with its exact row count and first/last row time (read from
its Parquet footer at load, see `timeline.row_facts`). An unfiltered `count` over segments read
whole needs nothing else: the broker builds the partial the historicals' per-segment ones would
merge into (`__bucket` = the earliest first row time, the summed count) and merges it with the
rest as usual, so the answer is the scatter path's, byte for byte. On a small machine the two HTTP hops
and three processes waiting for cores cost several times the count itself. An unfiltered
timeBoundary and dataSourceMetadata take the same facts (each segment's first and last row).

Only exactly answerable segments are taken: a timeseries of `count` and long/double min/max of
`__time` (post-aggregators allowed) at granularity `all`, without filter or virtual columns; no
query dataSource, no `bySegment`; the segment is served only by historicals that announced the
same facts, appears once in the plan, and its rows all lie inside the interval it is read under.
Every other segment goes to the data nodes. Pure logic, no I/O.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeGuard

import pyarrow as pa

from broker_service.segment_plan import SegmentTask
from strata.query import SEGMENT_COLUMN, Query
from strata.query.aggregators import Aggregator
from strata.query.aggregators.simple import CountAggregator, NumericAggregator
from strata.query.columns import TIME_COLUMN
from strata.query.datasource_metadata import DataSourceMetadataQuery
from strata.query.time_boundary import MAX_TIME, MIN_TIME, TimeBoundaryQuery
from strata.query.timeseries import TimeseriesQuery
from timeline import RowFacts

Answered = TimeseriesQuery | TimeBoundaryQuery | DataSourceMetadataQuery


def metadata_answerable(query: Query) -> TypeGuard[Answered]:
    """Whether the query's shape lets announced facts answer it (segments aside)."""
    if not query.plain_table or query.context.by_segment:
        return False
    if type(query) is DataSourceMetadataQuery:
        return True
    if type(query) is TimeBoundaryQuery:
        return query.filter is None
    if type(query) is not TimeseriesQuery:
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


@dataclass(frozen=True, slots=True)
class FactsSplit:
    """A plan's segments split by what announced facts answer: a pure function of the tasks and
    their selectors' facts, so kept on the plan while the server view's version stands."""

    whole: tuple[tuple[str, RowFacts, tuple[int, int]], ...]  # read whole: (id, facts, time span)
    rest: tuple[SegmentTask, ...]  # for the data nodes
    answered: int  # segments answered (those announced empty included)
    rows: int  # rows of `whole`
    first: int  # earliest first row time of `whole` (0 when empty)
    last: int  # latest last row time of `whole` (0 when empty)


def split_by_facts(tasks: Sequence[SegmentTask]) -> FactsSplit:
    """Which segments announced facts answer whole; a segment without rows is answered (it
    gives no partial row, as a historical's cursor finds no bucket there) and asks no node."""
    ids = [t.selector.segment.id for t in tasks]
    repeated = set() if len(set(ids)) == len(ids) else {i for i, n in Counter(ids).items() if n > 1}
    whole: list[tuple[str, RowFacts, tuple[int, int]]] = []
    rest: list[SegmentTask] = []
    for segment_id, task in zip(ids, tasks, strict=True):
        facts = task.selector.row_facts
        if facts is None or segment_id in repeated:
            rest.append(task)
            continue
        span = facts.time_span
        if span is None:
            continue  # announced empty: nothing to count, nothing to ask
        window = task.descriptor.interval
        if not window.start <= span[0] <= span[1] < window.end:
            rest.append(task)  # read in part: rows outside the interval must not count
            continue
        whole.append((segment_id, facts, span))
    return FactsSplit(
        tuple(whole),
        tuple(rest),
        len(tasks) - len(rest),
        sum([facts.num_rows for _, facts, _ in whole]),
        min([span[0] for _, _, span in whole], default=0),
        max([span[1] for _, _, span in whole], default=0),
    )


def split_metadata_partials(
    query: Answered, split: FactsSplit
) -> tuple[pa.Table | None, list[SegmentTask], int]:
    """The partials of the segments announced facts answer (None when there are no rows to
    report), the segments left for the data nodes, and how many segments were answered."""
    rest = list(split.rest)
    if not split.whole:
        return None, rest, split.answered
    if isinstance(query, TimeseriesQuery):
        return _timeseries_partial(query, split), rest, split.answered
    return _extremes_partials(split.whole), rest, split.answered


def _timeseries_partial(query: TimeseriesQuery, split: FactsSplit) -> pa.Table:
    """`group_rows`' shape, the segments' partials already merged into one row: no segment named,
    `__bucket` the earliest first row (an `all` cursor starts at the first row in the window, and
    the merge keeps the earliest), then each aggregator's intermediate. Counts add up and times
    compare exactly, so this is the row the merge would make of one partial per segment."""
    schema = query.plan.schema()
    arrays = [pa.nulls(1, pa.string()), pa.array([split.first], pa.int64())]
    for agg, field in zip(query.aggregations, list(schema)[2:], strict=True):
        if isinstance(agg, CountAggregator):
            value: int | float = split.rows
        else:
            assert isinstance(agg, NumericAggregator)
            value = split.first if agg.op == "min" else split.last
            value = float(value) if agg.kind == "double" else value
        arrays.append(pa.array([value], field.type))
    return pa.Table.from_arrays(arrays, schema=schema)


def _extremes_partials(whole: Sequence[tuple[str, RowFacts, tuple[int, int]]]) -> pa.Table:
    """timeBoundary's and dataSourceMetadata's shape: each segment's first and last row time."""
    return pa.table(
        {
            SEGMENT_COLUMN: pa.array([w[0] for w in whole], pa.string()),
            MIN_TIME: pa.array([w[2][0] for w in whole], pa.int64()),
            MAX_TIME: pa.array([w[2][1] for w in whole], pa.int64()),
        }
    )
