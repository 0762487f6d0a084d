"""Pure data model of time-partitioned, versioned segments (no I/O).

Intervals and instants are UTC epoch milliseconds; versions compare as strings (ISO timestamps).
"""

from timeline.granularity import ALL, NONE, Granularity, parse_granularity
from timeline.instant import format_instant, parse_instant
from timeline.interval import ETERNITY, MAX_INSTANT, MIN_INSTANT, Interval, condense_intervals
from timeline.partition_holder import PartitionHolder
from timeline.period import Period
from timeline.row_facts import RowFacts, with_row_facts
from timeline.segment import DataSegment, SegmentDescriptor
from timeline.shard_spec import PartitionChunk, ShardSpec
from timeline.versioned_timeline import (
    OverlappingSameVersionError,
    TimelineObjectHolder,
    VersionedIntervalTimeline,
)

__all__ = [
    "ALL",
    "ETERNITY",
    "MAX_INSTANT",
    "MIN_INSTANT",
    "NONE",
    "DataSegment",
    "Granularity",
    "Interval",
    "OverlappingSameVersionError",
    "PartitionChunk",
    "PartitionHolder",
    "Period",
    "RowFacts",
    "SegmentDescriptor",
    "ShardSpec",
    "TimelineObjectHolder",
    "VersionedIntervalTimeline",
    "condense_intervals",
    "format_instant",
    "parse_granularity",
    "parse_instant",
    "with_row_facts",
]
