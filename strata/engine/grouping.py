"""Grouped aggregation over segment rows: the engine half of `query.aggregation_engine`.

`group_rows` runs a `GroupingPlan` over the rows of a request's segments in one DuckDB pass,
grouping by segment (or across segments when nobody needs each segment's part); the plan's own
`merge` combines what it returns. `cursor_frame` lists the buckets each segment's cursor walks,
which timeseries zero-fills and topN answers with an empty list, as Druid does.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from strata.engine.data_window import cursor_window
from strata.engine.memory_source import is_memory
from strata.engine.multi_value import explode
from strata.engine.relation import filtered_relation
from strata.engine.segment_input import WINDOW_START, SegmentInput, reads_whole, segment_labels
from strata.query.aggregation_engine import BUCKET, GroupingPlan, agg_col, dim_col
from strata.query.base import SEGMENT_COLUMN
from strata.query.bucket_limit import MAX_BUCKETS, check_buckets
from strata.query.columns import SEGMENT_INDEX
from strata.query.duck import run_arrow
from strata.query.granularity_sql import bucket_sql
from timeline import Granularity, Interval, condense_intervals


def group_rows(
    plan: GroupingPlan,
    conn: duckdb.DuckDBPyConnection,
    inputs: Sequence[SegmentInput],
    *,
    per_segment: bool = True,
    cut: Callable[[str], str | None] | None = None,
) -> pa.Table:
    """Intermediates per (segment, bucket, dimensions) over the rows of `inputs`.

    `per_segment=False` groups across segments in the same pass and returns what `plan.merge`
    would make of the per-segment table (`__segment` null): far fewer groups to build when
    nobody needs each segment's part (a data node answering a plain client). `cut` wraps the
    grouping's SQL (e.g. in a per-segment rank cut) so it runs in the same statement.
    """
    starts, bucket = None, bucket_sql(plan.granularity, conn)
    bucket_fixed = plan.granularity.is_all  # one constant bucket: selected, never hashed per row
    constant = constant_buckets(plan.granularity, inputs)
    if constant is not None and per_segment:
        # one bucket per segment: looked up by the grouped segment index, not carried per row
        labels = segment_labels(inputs)
        bucket = (
            f"CAST([{', '.join(str(constant.get(s, 0)) for s in labels)}] AS BIGINT[])[{SEGMENT_INDEX} + 1]"
        )
        bucket_fixed = True
    elif constant is not None:  # each segment's rows fall in one bucket: a constant per segment
        starts, bucket = constant, WINDOW_START
    if plan.granularity.is_all and not per_segment:
        # `all` stamps the earliest window start among segments with matching rows: known up
        # front when every segment is read whole and unfiltered, else tracked per row
        starts = window_starts(inputs)
        if plan.filter is None and all(reads_whole(i) for i in inputs):
            bucket, starts = f"CAST({min(starts.values(), default=0)} AS BIGINT)", None
    relation, types = filtered_relation(
        inputs,
        plan.input_columns(),
        plan.filter,
        starts,
        plan.virtual_columns,
        labelled=per_segment,
        source=plan.source,
        positions=any(a.reads_element_positions() for a in plan.aggregators),
    )
    relation, types, dimensions = explode(relation, types, plan.dimensions, plan.multi_value_unnesting)
    dims = [f"{d.sql(types)} AS {dim_col(i)}" for i, d in enumerate(dimensions)]
    aggs = [e for i, a in enumerate(plan.aggregators) for e in a.partial_sql(agg_col(i), types, None)]
    # per segment, group by the segment's small integer index, not its long id string
    segment = SEGMENT_INDEX if per_segment else f"CAST(NULL AS VARCHAR) AS {SEGMENT_COLUMN}"
    keys = [segment, f"{bucket} AS {BUCKET}", *dims]
    grouped = [per_segment, not bucket_fixed, *(True for _ in dims)]
    if starts is not None and plan.granularity.is_all:
        # `all`: one timestamp, the earliest window start of segments with rows
        keys, grouped = [segment, *dims], [per_segment, *(True for _ in dims)]
        aggs.insert(0, f"min(min({WINDOW_START})) OVER () AS {BUCKET}")
    # constants (a null segment, one bucket) are selected, not grouped: hashing them per row costs
    # (with no key left, all stay grouped: no input rows must still give no row)
    positions = [str(i + 1) for i, g in enumerate(grouped) if g] or [str(i + 1) for i in range(len(keys))]
    sql = f"SELECT {', '.join(keys + aggs)} FROM ({relation}) GROUP BY {', '.join(positions)}"
    if cut is not None:  # outside, so its names are the output's, never a same-named input column
        sql = cut(sql) or sql
    table = run_arrow(conn, sql)
    if per_segment:
        labels = pa.array(segment_labels(inputs), pa.string()).take(table.column(SEGMENT_INDEX))
        table = table.append_column(SEGMENT_COLUMN, labels)
    table = plan._conform(table)
    if plan.granularity.is_all and table.num_rows and per_segment:
        table = stamp_window_starts(table, inputs)
    return table


def group_merged(
    plan: GroupingPlan,
    conn: duckdb.DuckDBPyConnection,
    inputs: Sequence[SegmentInput],
) -> pa.Table:
    """The merged intermediates of `inputs`: one grouping across segments when that is exact."""
    if all(a.split_invariant() for a in plan.aggregators):
        return group_rows(plan, conn, inputs, per_segment=False)
    return plan.merge(conn, [group_rows(plan, conn, inputs)])


def constant_buckets(granularity: Granularity, inputs: Sequence[SegmentInput]) -> dict[str, int] | None:
    """Each segment's bucket start when all its rows in the read window share one bucket, else None.

    Hourly segments under an hour (or coarser) granularity are the common case: the bucket is then
    a per-segment constant column instead of an expression computed and hashed for every row.
    A live segment is judged by its whole read window, since rows may arrive while the query runs.
    """
    if granularity.is_all or granularity.is_none:
        return None
    buckets: dict[str, int] = {}
    for inp in inputs:
        window = inp.interval if is_memory(inp.path) else cursor_window(inp)
        if window is None or window.is_empty:
            continue  # no rows to bucket
        start = granularity.bucket_start(window.start)
        if granularity.bucket_start(window.end - 1) != start:
            return None
        if buckets.setdefault(inp.segment_id, start) != start:
            return None  # read under several intervals falling in different buckets
    return buckets


def window_starts(inputs: Sequence[SegmentInput]) -> dict[str, int]:
    """Each segment's cursor window start (segments without rows in their window are left out)."""
    starts: dict[str, int] = {}
    for inp in inputs:
        window = cursor_window(inp)
        if window is not None:
            starts[inp.segment_id] = min(window.start, starts.get(inp.segment_id, window.start))
    return starts


def stamp_window_starts(table: pa.Table, inputs: Sequence[SegmentInput]) -> pa.Table:
    """Set `__bucket` of `all`-granularity rows to their segment's cursor window start."""
    starts = window_starts(inputs)
    ids = pa.array(list(starts), pa.string())
    positions = pc.index_in(table.column(SEGMENT_COLUMN), value_set=ids)
    stamped = pc.take(pa.array(list(starts.values()), pa.int64()), positions)
    return table.set_column(table.schema.get_field_index(BUCKET), BUCKET, stamped)


def cursor_frame(granularity: Granularity, inputs: Sequence[SegmentInput]) -> pa.Table:
    """Every (segment, bucket) the segments' cursors walk, whether or not a row matches there.

    Druid emits these buckets: timeseries zero-fills them, topN answers them with an empty list.
    More than `MAX_BUCKETS` of them end the query before any is built.
    """
    if granularity.is_none:
        return _millisecond_frame(inputs)
    segments: list[str] = []
    starts: list[int] = []
    seen: set[tuple[str, int]] = set()  # a segment read under several query intervals
    for inp in inputs:
        window = cursor_window(inp)
        if window is None:
            continue
        if granularity.is_all:
            buckets = [window.start]
        else:
            buckets = [b.start for b in itertools.islice(granularity.buckets(window), MAX_BUCKETS + 1)]
        buckets = [b for b in buckets if (inp.segment_id, b) not in seen]
        seen.update((inp.segment_id, b) for b in buckets)
        check_buckets(len(starts) + len(buckets), granularity.to_json())
        segments += [inp.segment_id] * len(buckets)
        starts += buckets
    return pa.table({SEGMENT_COLUMN: pa.array(segments, pa.string()), BUCKET: pa.array(starts, pa.int64())})


def _millisecond_frame(inputs: Sequence[SegmentInput]) -> pa.Table:
    """`cursor_frame` for granularity `none`: every millisecond of each segment's cursor windows
    (merged where a segment is read under overlapping intervals), counted before it is built."""
    windows: dict[str, list[Interval]] = {}
    for inp in inputs:
        window = cursor_window(inp)
        if window is not None:
            windows.setdefault(inp.segment_id, []).append(window)
    runs: list[tuple[str, int, int]] = []
    total = 0
    for segment, spans in windows.items():
        for span in condense_intervals(spans):
            total += span.end - span.start
            check_buckets(total, "none")
            runs.append((segment, span.start, span.end))
    segment_ids = pa.array([segment for segment, _, _ in runs], pa.string())
    lengths = np.asarray([end - start for _, start, end in runs], np.int64)
    starts = np.concatenate([np.arange(s, e, dtype=np.int64) for _, s, e in runs] or [np.zeros(0, np.int64)])
    owners = pc.take(segment_ids, pa.array(np.repeat(np.arange(len(runs)), lengths)))
    return pa.table({SEGMENT_COLUMN: owners, BUCKET: pa.array(starts, pa.int64())})
