"""BatchSet searching only batches with room places every segment where a scan of all batches in
creation order (the plain rule, the oracle) would, through any mix of adds and removes."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from strata.data_node.batch_set import BatchSet
from strata.discovery import BatchLimits, encode_segment
from timeline import DataSegment, Interval

DAY = 86_400_000
SEGMENTS = [
    DataSegment("ds", Interval(i * DAY, (i + 1) * DAY), "v1", load_spec={"pad": "x" * (i % 7) * 40})
    for i in range(60)
]


class Oracle:
    """Druid's rule as plainly as it reads: the first batch, in creation order, with room."""

    def __init__(self, limits: BatchLimits):
        self.limits = limits
        self.batches: dict[str, dict[str, int]] = {}  # name -> segment id -> encoded size
        self.names = (f"b{i}" for i in itertools.count())

    def add(self, segment: DataSegment) -> None:
        if any(segment.id in b for b in self.batches.values()):
            return
        size = len(encode_segment(segment))
        for batch in self.batches.values():
            used = 2 + sum(batch.values()) + len(batch) - 1 if batch else 2
            extra = size + (1 if batch else 0)
            if len(batch) < self.limits.segments_per_node and used + extra <= self.limits.max_bytes_per_node:
                batch[segment.id] = size
                return
        self.batches[next(self.names)] = {segment.id: size}

    def remove(self, segment_id: str) -> None:
        for name, batch in list(self.batches.items()):
            if batch.pop(segment_id, None) is not None and not batch:
                del self.batches[name]


ops = st.lists(st.tuples(st.booleans(), st.integers(0, len(SEGMENTS) - 1)), max_size=150)


@settings(max_examples=200, deadline=None)
@given(ops, st.integers(1, 6), st.sampled_from([1024, 2048, 8192]))
def test_placements_equal_the_plain_scan(
    steps: list[tuple[bool, int]], per_node: int, max_bytes: int
) -> None:
    limits = BatchLimits(segments_per_node=per_node, max_bytes_per_node=max_bytes)
    counter = itertools.count()
    batches = BatchSet(limits, lambda: f"b{next(counter)}")
    oracle = Oracle(limits)
    for add, i in steps:
        if add:
            batches.add([SEGMENTS[i]])
            oracle.add(SEGMENTS[i])
        else:
            batches.remove([SEGMENTS[i].id])
            oracle.remove(SEGMENTS[i].id)
        placed = {name: sorted(b["identifier"] for b in _items(batches, name)) for name in batches.names()}
        assert placed == {name: sorted(b) for name, b in oracle.batches.items()}


def _items(batches: BatchSet, name: str) -> list[dict[str, str]]:
    import orjson

    content = batches.content(name)
    assert content is not None
    items: list[dict[str, str]] = orjson.loads(content)
    return items
