"""Where a segment's rows actually lie, from the Parquet footer's `__time` statistics.

Druid runs a segment's cursor over the query interval clipped to the segment's data interval
(first to last row time), which decides which empty buckets a timeseries fills and the timestamp
of an `all`-granularity row. Footer statistics give that interval without reading any rows.
"""

from __future__ import annotations

import functools
import os

import pyarrow.parquet as pq

from query.memory_source import is_memory, lookup
from query.segment_input import TIME_COLUMN, SegmentInput
from timeline import Interval


@functools.lru_cache(maxsize=65536)
def _time_range(path: str, mtime_ns: int) -> tuple[int, int] | None:
    meta = pq.read_metadata(path)
    names = meta.schema.names
    if TIME_COLUMN not in names or meta.num_rows == 0:
        return None
    col = names.index(TIME_COLUMN)
    lows, highs = [], []
    for g in range(meta.num_row_groups):
        group = meta.row_group(g)
        if group.num_rows == 0:
            continue
        stats = group.column(col).statistics
        if stats is None or not stats.has_min_max:
            return _scan_range(path)
        lows.append(int(stats.min_raw))
        highs.append(int(stats.max_raw))
    return (min(lows), max(highs)) if lows else None


def _scan_range(path: str) -> tuple[int, int] | None:
    import pyarrow.compute as pc

    times = pq.read_table(path, columns=[TIME_COLUMN]).column(TIME_COLUMN).cast("int64")
    bounds = pc.min_max(times).as_py()
    return None if bounds["min"] is None else (bounds["min"], bounds["max"])


def data_interval(path: str) -> Interval | None:
    """[first row time, last row time + 1ms) of a segment file; None when it has no rows."""
    bounds = lookup(path).time_range if is_memory(path) else _time_range(path, os.stat(path).st_mtime_ns)
    return None if bounds is None else Interval(bounds[0], bounds[1] + 1)


def reads_whole(inp: SegmentInput) -> bool:
    """Whether the read window holds every row of the segment (no time filter needed)."""
    data = data_interval(inp.path)
    return data is None or inp.interval.contains(data)


def cursor_window(inp: SegmentInput) -> Interval | None:
    """The part of the read window that holds data, as Druid's cursor sees it (None: nothing)."""
    data = data_interval(inp.path)
    if data is None:
        return None
    window = inp.interval.overlap(data)
    return None if window is None or window.is_empty else window
