"""What part of a datasource a query reads: intervals, or an exact list of segments.

Clients send intervals (a list of ISO strings, a single string as pydruid does, or
`{"type":"intervals",...}`); the broker rewrites each per-server request into
`{"type":"segments","segments":[{"itvl","ver","part"}]}` naming exactly the segments that server
must run, with each `itvl` already clipped to the query.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from strata.query.errors import invalid
from timeline import Interval, SegmentDescriptor, condense_intervals


@dataclass(frozen=True, slots=True)
class IntervalsSpec:
    """Condensed on parsing, as Druid's MultipleIntervalSegmentSpec: sorted, none overlapping."""

    intervals: tuple[Interval, ...]

    def to_json(self) -> Any:
        return [str(i) for i in self.intervals]


@dataclass(frozen=True, slots=True)
class SegmentsSpec:
    descriptors: tuple[SegmentDescriptor, ...]

    @property
    def intervals(self) -> tuple[Interval, ...]:
        return tuple(d.interval for d in self.descriptors)

    def to_json(self) -> Any:
        return {"type": "segments", "segments": [d.to_json() for d in self.descriptors]}


QuerySegmentSpec = IntervalsSpec | SegmentsSpec


def _parse_interval(text: Any) -> Interval:
    if not isinstance(text, str):
        raise invalid("Intervals must be ISO-8601 interval strings, got %r", text)
    try:
        return Interval.parse(text)
    except ValueError as e:
        raise invalid("Invalid interval [%s]: %s", text, e) from None


def parse_segment_spec(value: Any) -> QuerySegmentSpec:
    if value is None:
        raise invalid("Missing required field [intervals]")
    if isinstance(value, str):
        return IntervalsSpec((_parse_interval(value),))
    if isinstance(value, list):
        if not value:
            raise invalid("Field [intervals] must not be empty")
        return IntervalsSpec(condense_intervals(_parse_interval(v) for v in value))
    if isinstance(value, dict):
        kind = value.get("type")
        if kind == "intervals":
            return parse_segment_spec(value.get("intervals"))
        if kind == "segments":
            segments = value.get("segments")
            if not isinstance(segments, list) or not segments:
                raise invalid("Field [intervals.segments] must be a non-empty array")
            try:
                return SegmentsSpec(tuple(SegmentDescriptor.from_json(s) for s in segments))
            except (KeyError, TypeError, ValueError) as e:
                raise invalid("Invalid segment descriptor in [intervals.segments]: %s", e) from None
        raise invalid("Unknown intervals type [%s]; expected 'intervals' or 'segments'", kind)
    raise invalid("Field [intervals] must be a string, an array or an object")
