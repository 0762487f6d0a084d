"""The segments this node has loaded, as the query path sees them.

One timeline per datasource over the locally loaded segment files. A query by intervals reads
what the node's own timeline shows for them; a query naming exact segments (from a broker) finds
each by interval, version and partition, even if a newer version overshadows it here.
"""

from __future__ import annotations

from dataclasses import dataclass

from strata.engine import SegmentInput
from strata.query import Query
from strata.query.segment_spec import SegmentsSpec
from timeline import DataSegment, Interval, SegmentDescriptor, VersionedIntervalTimeline


@dataclass(frozen=True, slots=True)
class LoadedSegment:
    segment: DataSegment
    path: str  # local index.parquet

    def input(self, interval: Interval) -> SegmentInput:
        return SegmentInput(self.segment.id, self.segment.descriptor, self.path, interval)


class ServedSegments:
    """Mutated and read on the event loop thread only (see VersionedIntervalTimeline)."""

    def __init__(self) -> None:
        self._timelines: dict[str, VersionedIntervalTimeline[LoadedSegment]] = {}
        self._by_id: dict[str, LoadedSegment] = {}

    def add(self, segment: DataSegment, path: str) -> None:
        if segment.id in self._by_id:
            return
        loaded = LoadedSegment(segment, path)
        self._by_id[segment.id] = loaded
        timeline = self._timelines.setdefault(segment.data_source, VersionedIntervalTimeline())
        timeline.add_segment(segment, loaded)

    def remove(self, segment: DataSegment) -> bool:
        loaded = self._by_id.pop(segment.id, None)
        if loaded is None:
            return False
        timeline = self._timelines[segment.data_source]
        timeline.remove_segment(segment, loaded)
        if timeline.is_empty():
            del self._timelines[segment.data_source]
        return True

    def __contains__(self, segment_id: object) -> bool:
        return segment_id in self._by_id

    def __len__(self) -> int:
        return len(self._by_id)

    def segments(self) -> list[DataSegment]:
        return [s.segment for s in self._by_id.values()]

    def data_sources(self) -> list[str]:
        return sorted(self._timelines)

    def inputs_for_intervals(self, query: Query) -> list[SegmentInput]:
        timeline = self._timelines.get(query.data_source)
        if timeline is None or isinstance(query.segment_spec, SegmentsSpec):
            return []
        inputs: list[SegmentInput] = []
        for interval in query.segment_spec.intervals:
            for holder in timeline.lookup(interval):
                inputs.extend(chunk.object.input(holder.interval) for chunk in holder.chunks)
        return inputs

    def input_for_descriptor(self, data_source: str, descriptor: SegmentDescriptor) -> SegmentInput | None:
        timeline = self._timelines.get(data_source)
        if timeline is None:
            return None
        chunk = timeline.find_chunk(descriptor.interval, descriptor.version, descriptor.partition)
        if chunk is None:
            return None
        loaded = chunk.object
        window = loaded.segment.interval.overlap(descriptor.interval)
        return loaded.input(window or descriptor.interval)
