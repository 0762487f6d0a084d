"""Secondary partitioning: every row lands in exactly one segment, by the documented rule."""

from __future__ import annotations

import copy
import math

import orjson
import pyarrow.parquet as pq

from strata.ingestion import ingest
from strata.ingestion.partitioning import murmur3_32


def test_murmur3_matches_reference_vectors():
    # published MurmurHash3_x86_32 (seed 0) values, as Guava's murmur3_32 computes them
    assert murmur3_32(b"") == 0
    assert murmur3_32(b"hello") == 0x248BFA47
    assert murmur3_32(b"The quick brown fox jumps over the lazy dog") == 0x2E4FF723


def _spec(tutorial_spec, partitions):
    spec = copy.deepcopy(tutorial_spec)
    spec["spec"]["tuningConfig"] = {"type": "index_parallel", "partitionsSpec": partitions}
    return spec


def test_hashed_partitions_follow_murmur3_abs(tutorial_spec, stores):
    summary = ingest(
        _spec(tutorial_spec, {"type": "hashed", "numShards": 4, "partitionDimensions": ["channel"]}), **stores
    )
    assert sum(w.rows for w in summary.segments) == 39_244
    for w in summary.segments:
        shard = w.segment.shard_spec.to_json()
        assert shard["type"] == "hashed" and shard["partitions"] == len(summary.segments)
        channels = set(pq.read_table(w.segment.load_spec["path"], columns=["channel"]).column(0).to_pylist())
        for c in channels:
            key = orjson.dumps([[] if c is None else [c]])
            assert abs(math.fmod(murmur3_32(key), 4)) == shard["bucketId"]


def test_single_dim_ranges_cover_sorted_values(tutorial_spec, stores):
    spec = _spec(
        tutorial_spec, {"type": "single_dim", "partitionDimension": "channel", "targetRowsPerSegment": 10_000}
    )
    summary = ingest(spec, **stores)
    segs = sorted(summary.segments, key=lambda w: w.segment.partition_num)
    assert len(segs) > 1 and sum(w.rows for w in segs) == 39_244
    for w in segs:
        shard = w.segment.shard_spec.to_json()
        assert shard["type"] == "single" and shard["numCorePartitions"] == len(segs)
        values = pq.read_table(w.segment.load_spec["path"], columns=["channel"]).column(0).to_pylist()
        present = [v for v in values if v is not None]
        assert shard["start"] is None or min(present) >= shard["start"]
        assert shard["end"] is None or max(present) < shard["end"]
    assert segs[0].segment.shard_spec.to_json()["start"] is None
    assert segs[-1].segment.shard_spec.to_json()["end"] is None


def test_range_partitions_on_null_heavy_dimensions_publish_and_reload(tutorial_spec, stores):
    """Boundaries holding nulls (countryName, cityName are mostly null) used to crash the shard spec
    parser; every segment's descriptor must read back and the rows stay whole."""
    from strata.storage import open_metadata_store
    from timeline import DataSegment

    spec = _spec(
        tutorial_spec,
        {"type": "range", "partitionDimensions": ["countryName", "cityName"], "targetRowsPerSegment": 8_000},
    )
    summary = ingest(spec, **stores)
    assert len(summary.segments) > 1 and sum(w.rows for w in summary.segments) == 39_244
    store = open_metadata_store(stores["metadata"])
    try:
        used = store.used_segments("wikipedia")
    finally:
        store.close()
    for w in summary.segments:
        again = DataSegment.from_json(w.segment.to_json())
        assert again.shard_spec.partition_num == w.segment.shard_spec.partition_num
    assert len(used) == len(summary.segments)
