"""DataSegment and SegmentDescriptor in Druid's JSON shapes; shard specs and completeness."""

from __future__ import annotations

import pytest

from timeline import DataSegment, Interval, PartitionHolder, SegmentDescriptor, ShardSpec

DRUID_EXAMPLE = {
    "dataSource": "wikipedia",
    "interval": "2012-05-23T00:00:00.000Z/2012-05-24T00:00:00.000Z",
    "version": "2012-05-24T00:10:00.046Z",
    "loadSpec": {"type": "s3_zip", "bucket": "bucket_for_segment", "key": "path/to/segment/on/s3"},
    "dimensions": "comment,country,robot,user",
    "metrics": "added,delta,deleted",
    "shardSpec": {"type": "none"},
    "binaryVersion": 9,
    "size": 12345,
    "identifier": "wikipedia_2012-05-23T00:00:00.000Z_2012-05-24T00:00:00.000Z_2012-05-24T00:10:00.046Z",
}


def test_data_segment_round_trips_druid_json() -> None:
    seg = DataSegment.from_json(DRUID_EXAMPLE)
    assert seg.dimensions == ("comment", "country", "robot", "user")
    assert seg.metrics == ("added", "delta", "deleted")
    assert seg.id == DRUID_EXAMPLE["identifier"]
    assert seg.to_json() == DRUID_EXAMPLE


def test_data_segment_reads_lists_and_keeps_unknown_fields() -> None:
    obj = dict(DRUID_EXAMPLE, dimensions=["a", "b"], metrics=[], totalRows=7)
    obj["shardSpec"] = {"type": "numbered", "partitionNum": 2, "partitions": 3}
    seg = DataSegment.from_json(obj)
    assert seg.dimensions == ("a", "b") and seg.metrics == ()
    assert seg.id.endswith("_2") and seg.partition_num == 2
    assert seg.to_json()["totalRows"] == 7
    assert seg.descriptor == SegmentDescriptor(seg.interval, seg.version, 2)


def test_data_segment_missing_field() -> None:
    with pytest.raises(ValueError, match="dataSource"):
        DataSegment.from_json({"interval": "2012/2013", "version": "v"})


def test_segment_descriptor_json() -> None:
    d = SegmentDescriptor.from_json({"itvl": "2015-09-12/2015-09-13", "ver": "v1", "part": 3})
    assert d.interval == Interval.parse("2015-09-12/2015-09-13")
    assert d.to_json() == {
        "itvl": "2015-09-12T00:00:00.000Z/2015-09-13T00:00:00.000Z",
        "ver": "v1",
        "part": 3,
    }


@pytest.mark.parametrize(
    ("specs", "complete"),
    [
        ([{"type": "none"}], True),
        ([{"type": "numbered", "partitionNum": 0, "partitions": 2}], False),
        ([{"type": "numbered", "partitionNum": p, "partitions": 2} for p in (0, 1)], True),
        ([{"type": "numbered", "partitionNum": 1, "partitions": 2}], False),
        ([{"type": "hashed", "partitionNum": p, "partitions": 3, "partitionDimensions": ["x"]} for p in (0, 1, 2)],
         True),
        ([{"type": "linear", "partitionNum": 5}], True),
        ([{"type": "single", "dimension": "d", "start": None, "end": "m", "partitionNum": 0},
          {"type": "single", "dimension": "d", "start": "m", "end": None, "partitionNum": 1}], True),
        ([{"type": "single", "dimension": "d", "start": None, "end": "m", "partitionNum": 0},
          {"type": "single", "dimension": "d", "start": "n", "end": None, "partitionNum": 1}], False),
        ([{"type": "range", "dimensions": ["d"], "start": None, "end": None, "partitionNum": 0,
           "numCorePartitions": 1}], True),
    ],
)  # fmt: skip
def test_shard_spec_completeness(specs, complete) -> None:
    holder: PartitionHolder[int] = PartitionHolder()
    for i, spec in enumerate(specs):
        shard = ShardSpec.from_json(spec)
        assert shard.to_json() == spec
        holder.add(shard.create_chunk(i))
    assert holder.is_complete() is complete


def test_unknown_shard_spec() -> None:
    with pytest.raises(ValueError, match="unknown shardSpec"):
        ShardSpec.from_json({"type": "nope"})


def test_partition_chunks_order_by_chunk_number() -> None:
    chunks = [ShardSpec.numbered(n, 3).create_chunk(f"seg{n}") for n in (2, 0, 1)]
    assert [c.chunk_number for c in sorted(chunks)] == [0, 1, 2]
    assert chunks[1] < chunks[2] < chunks[0] and chunks[0] >= chunks[2]
    assert chunks[1] == ShardSpec.numbered(0, 3).create_chunk("seg0")
    assert chunks[1] != ShardSpec.numbered(0, 3).create_chunk("other")


def test_holder_chunks_follow_every_change() -> None:
    """A lookup returns the holder's chunks as a tuple (kept between changes when there are several;
    a lone chunk is held as itself); a chunk added or removed after a lookup shows in the next one."""
    holder: PartitionHolder[str] = PartitionHolder()
    holder.add(ShardSpec.numbered(0, 0).create_chunk("a"))
    first = holder.chunks()
    assert holder.chunks() == first and len(holder) == 1 and not holder.is_empty()
    holder.add(ShardSpec.numbered(1, 0).create_chunk("b"))
    assert [c.object for c in holder.chunks()] == ["a", "b"] and holder.chunks() is holder.chunks()
    assert holder.remove(ShardSpec.numbered(0, 0).create_chunk("a")) is not None
    assert [c.object for c in holder.chunks()] == ["b"]
    assert [c.object for c in first] == ["a"]  # what an earlier lookup returned does not change
    assert holder.remove(ShardSpec.numbered(1, 0).create_chunk("b")) is not None
    assert holder.chunks() == () and holder.is_empty() and len(holder) == 0 and not holder.is_complete()
