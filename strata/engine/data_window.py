"""Where a segment's rows actually lie, from the Parquet footer's `__time` statistics.

Druid runs a segment's cursor over the query interval clipped to the segment's data interval
(first to last row time), which decides which empty buckets a timeseries fills and the timestamp
of an `all`-granularity row. `strata.engine.segment_input.data_interval` reads it from the footer.
"""

from __future__ import annotations

from strata.engine.segment_input import SegmentInput, data_interval
from timeline import Interval


def cursor_window(inp: SegmentInput) -> Interval | None:
    """The part of the read window that holds data, as Druid's cursor sees it (None: nothing)."""
    data = data_interval(inp.path)
    if data is None:
        return None
    window = inp.interval.overlap(data)
    return None if window is None or window.is_empty else window
