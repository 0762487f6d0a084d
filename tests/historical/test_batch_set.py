"""Batch bookkeeping: Druid's limits hold and every segment is in exactly one batch."""

from __future__ import annotations

import itertools

import orjson

from strata.data_node.batch_set import BatchSet
from strata.discovery import BatchLimits
from timeline import DataSegment, Interval


def segments(n: int, pad: int = 0) -> list[DataSegment]:
    day = 86_400_000
    return [
        DataSegment("ds", Interval(i * day, (i + 1) * day), "v1", load_spec={"pad": "x" * pad})
        for i in range(n)
    ]


def contents(batches: BatchSet) -> dict[str, list[str]]:
    out = {}
    for name in batches.names():
        data = batches.content(name)
        assert data is not None
        out[name] = [item["identifier"] for item in orjson.loads(data)]
    return out


def new_names() -> BatchSet:
    counter = itertools.count()
    return BatchSet(BatchLimits(), lambda: f"b{next(counter)}")


def test_fifty_per_batch_and_every_segment_once() -> None:
    batches = new_names()
    segs = segments(120)
    changed = batches.add(segs)
    found = contents(batches)
    assert changed == set(found) and len(found) == 3
    assert sorted(len(v) for v in found.values()) == [20, 50, 50]
    all_ids = [sid for ids in found.values() for sid in ids]
    assert sorted(all_ids) == sorted(s.id for s in segs)


def test_byte_limit() -> None:
    batches = BatchSet(BatchLimits(max_bytes_per_node=8 * 1024), lambda: f"b{len(batches.names())}x")
    batches.add(segments(30, pad=1000))
    for name in batches.names():
        data = batches.content(name)
        assert data is not None and len(data) <= 8 * 1024


def test_remove_rewrites_then_deletes_and_refills() -> None:
    batches = new_names()
    segs = segments(60)
    batches.add(segs)
    first = next(n for n, ids in contents(batches).items() if len(ids) == 50)
    in_first = contents(batches)[first]
    changed = batches.remove(in_first[:10])
    assert changed == {first} and len(contents(batches)[first]) == 40
    still_there = [s for s in segs if s.id not in in_first[:10]][:5]
    assert batches.add(still_there) == set()  # already announced: nothing changes
    assert batches.add([s for s in segs if s.id == in_first[0]]) == {first}  # refills the batch with room
    batches.remove(in_first)
    assert batches.content(first) is None and first not in batches.names()
    assert len(batches) == 10
