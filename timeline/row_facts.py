"""A segment's row count and `__time` span, announced by the historical that read its file.

A historical reads each segment's Parquet footer when it loads it; it adds the exact row count
and first/last row time to the `DataSegment` it announces (extra keys, which Druid's tools
ignore), so a broker can answer "how many rows" without asking any data node, as Druid's broker
knows `sys.segments.num_rows`. Absent or malformed keys mean "unknown": ask the data node.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TypeGuard

from timeline.segment import DataSegment

NUM_ROWS = "numRows"
MIN_TIME = "minTime"  # first row's `__time`, epoch ms
MAX_TIME = "maxTime"  # last row's `__time`, epoch ms


@dataclass(frozen=True, slots=True)
class RowFacts:
    num_rows: int
    time_span: tuple[int, int] | None  # (first, last) row time; None exactly when there are no rows

    def to_json(self) -> dict[str, int]:
        out = {NUM_ROWS: self.num_rows}
        if self.time_span is not None:
            out[MIN_TIME], out[MAX_TIME] = self.time_span
        return out

    @classmethod
    def of(cls, segment: DataSegment) -> RowFacts | None:
        """The facts a segment was announced with; None when absent or inconsistent."""
        extra = segment.extra
        rows, low, high = extra.get(NUM_ROWS), extra.get(MIN_TIME), extra.get(MAX_TIME)
        if not _is_int(rows) or rows < 0:
            return None
        if rows == 0:
            return cls(0, None) if low is None and high is None else None
        if not (_is_int(low) and _is_int(high)) or low > high:
            return None
        return cls(rows, (low, high))


def with_row_facts(segment: DataSegment, facts: RowFacts | None) -> DataSegment:
    """The segment to announce: with `facts` in its JSON, or without any (stale ones dropped)."""
    extra = {k: v for k, v in segment.extra.items() if k not in (NUM_ROWS, MIN_TIME, MAX_TIME)}
    if facts is not None:
        extra.update(facts.to_json())
    return dataclasses.replace(segment, extra=extra)


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)
