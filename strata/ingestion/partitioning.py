"""Which rows go into which segment: the one partitioning core every ingestion engine calls.

Pure (numpy/Arrow in, plans out, no I/O), so the local engine and a Spark engine (per time chunk)
cut segments identically. Input rows must already be sorted by time chunk, `__time`, dimensions.

- dynamic: each time chunk is cut, in sort order, into ceil(n / maxRowsPerSegment) partitions of
  maxRowsPerSegment rows (the last one holds the rest), as Druid's dynamic partitioning fills a
  segment to maxRowsPerSegment before opening the next.
- hashed: rows go to bucket `abs(murmur3_32(json(groupKey)) % numBuckets)` as Druid's
  `murmur3_32_abs` partition function does; empty buckets make no segment.
- range / single_dim: distinct key values in order are cut into ranges of about
  targetRowsPerSegment rows; one key value never spans two partitions.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from strata.ingestion.dimension_values import json_storage, stage_json
from strata.ingestion.spec import DynamicPartitions, HashedPartitions, PartitionsSpec, RangePartitions
from strata.storage.segment_layout import is_json
from timeline import ShardSpec


@dataclass(frozen=True)
class PartitionPlan:
    chunk_start: int
    index: int  # 0-based partition number within the chunk (before any append offset)
    count: int  # partitions in the chunk
    rows: np.ndarray  # ascending row indices into the sorted table
    shard: dict[str, Any] = field(default_factory=dict)  # secondary-partitioning fields of the shardSpec

    def shard_spec(self, first_partition: int = 0, core_partitions: int | None = None) -> ShardSpec:
        """Druid's shardSpec: `none` for an unsplit chunk, else numbered-like with the core partition count.

        When appending, `first_partition` is the next free number and `core_partitions` the existing
        core set's size, so the new partitions extend a complete set without redefining it.
        """
        num = first_partition + self.index
        kind = self.shard.get("type", "numbered")
        if kind == "numbered" and self.count == 1 and first_partition == 0:
            return ShardSpec.none()
        core = self.count if core_partitions is None else core_partitions
        raw: dict[str, Any] = {"type": kind, "partitionNum": num}
        if kind in ("numbered", "hashed"):
            raw["partitions"] = core
        else:
            raw["numCorePartitions"] = core
        raw.update({k: v for k, v in self.shard.items() if k != "type"})
        return ShardSpec.from_json(raw)


def chunk_bounds(chunks: np.ndarray) -> Iterator[tuple[int, int, int]]:
    """(chunk start, first row, end row) of each run of equal values in a sorted chunk array."""
    if chunks.size == 0:
        return
    edges = np.flatnonzero(np.diff(chunks)) + 1
    starts = np.concatenate(([0], edges))
    ends = np.concatenate((edges, [chunks.size]))
    for lo, hi in zip(starts.tolist(), ends.tolist(), strict=True):
        yield int(chunks[lo]), lo, hi


def plan_partitions(
    chunks: np.ndarray, table: pa.Table, spec: PartitionsSpec, dimensions: Sequence[str]
) -> list[PartitionPlan]:
    """Partitions of every time chunk; `chunks` holds each row's chunk start, `table` the sorted rows."""
    plans: list[PartitionPlan] = []
    for start, lo, hi in chunk_bounds(chunks):
        if isinstance(spec, DynamicPartitions):
            plans += _dynamic(start, lo, hi, spec.max_rows_per_segment)
        elif isinstance(spec, HashedPartitions):
            plans += _hashed(start, lo, hi, table.slice(lo, hi - lo), spec, dimensions)
        else:
            plans += _range(start, lo, hi, table.slice(lo, hi - lo), spec)
    return plans


def _dynamic(start: int, lo: int, hi: int, max_rows: int) -> list[PartitionPlan]:
    count = math.ceil((hi - lo) / max_rows)
    return [
        PartitionPlan(start, i, count, np.arange(lo + i * max_rows, min(hi, lo + (i + 1) * max_rows)))
        for i in range(count)
    ]


# -- hashed ---------------------------------------------------------------------------------------
def murmur3_32(data: bytes, seed: int = 0) -> int:
    """Guava's `Hashing.murmur3_32()` as a signed 32-bit int (`HashCode.asInt()`)."""
    c1, c2, mask = 0xCC9E2D51, 0x1B873593, 0xFFFFFFFF
    h = seed & mask
    n = len(data)
    whole = n - n % 4
    for i in range(0, whole, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * c1) & mask
        k = ((k << 15) | (k >> 17)) & mask
        k = (k * c2) & mask
        h ^= k
        h = ((h << 13) | (h >> 19)) & mask
        h = (h * 5 + 0xE6546B64) & mask
    tail = data[whole:]
    if tail:
        k = int.from_bytes(tail, "little")
        k = (k * c1) & mask
        k = ((k << 15) | (k >> 17)) & mask
        k = (k * c2) & mask
        h ^= k
    h ^= n
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & mask
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & mask
    h ^= h >> 16
    return h - (1 << 32) if h & 0x80000000 else h


def _as_dimension_value(v: Any) -> list[str]:
    if isinstance(v, list):  # a multi-value row: its values
        return [str(e) for e in v]
    return [] if v is None else [str(v)]


def _key_codes(table: pa.Table, columns: Sequence[str]) -> tuple[list[tuple[Any, ...]], np.ndarray]:
    """Distinct value tuples of `columns` and, per row, the index of its tuple."""
    codes, dictionaries = [], []
    for name in columns:
        column = table.column(name).combine_chunks()
        if is_json(column.type) or pa.types.is_list(column.type):  # keyed by their JSON text
            enc = pc.dictionary_encode(json_storage(stage_json(column)))
            dictionaries.append([*(orjson.loads(t) for t in enc.dictionary.to_pylist()), None])
            codes.append(enc.indices.fill_null(len(enc.dictionary)).to_numpy(zero_copy_only=False))
            continue
        enc = pc.dictionary_encode(column)
        dictionaries.append([*enc.dictionary.to_pylist(), None])
        codes.append(enc.indices.fill_null(len(enc.dictionary)).to_numpy(zero_copy_only=False))
    stacked = np.stack(codes, axis=1) if codes else np.zeros((table.num_rows, 0), dtype=np.int64)
    uniq, inverse = np.unique(stacked, axis=0, return_inverse=True)
    keys = [tuple(dictionaries[j][int(c)] for j, c in enumerate(row)) for row in uniq]
    return keys, inverse.reshape(-1)


def _hashed(
    start: int, lo: int, hi: int, rows: pa.Table, spec: HashedPartitions, dimensions: Sequence[str]
) -> list[PartitionPlan]:
    n = hi - lo
    buckets = spec.num_shards or max(1, math.ceil(n / spec.target_rows_per_segment))
    dims = list(spec.partition_dimensions)
    if dims:
        keys, inverse = _key_codes(rows, dims)
        payloads = [orjson.dumps([_as_dimension_value(v) for v in key]) for key in keys]
    else:  # Druid's default group key: the truncated timestamp and every dimension
        names = ["__time", *dimensions]
        keys, inverse = _key_codes(rows, names)
        payloads = [
            orjson.dumps([key[0], {k: v for k, v in zip(names[1:], key[1:], strict=True)}]) for key in keys
        ]
    key_bucket = np.asarray([abs(math.fmod(murmur3_32(p), buckets)) for p in payloads], dtype=np.int64)
    row_bucket = key_bucket[inverse] if len(keys) else np.zeros(n, dtype=np.int64)
    present = np.unique(row_bucket)
    shard = {"type": "hashed", "partitionDimensions": list(spec.partition_dimensions),
             "partitionFunction": "murmur3_32_abs", "numBuckets": buckets}  # fmt: skip
    return [
        PartitionPlan(
            start, i, len(present), lo + np.flatnonzero(row_bucket == b), {**shard, "bucketId": int(b)}
        )
        for i, b in enumerate(present.tolist())
    ]


# -- range ----------------------------------------------------------------------------------------
def _sort_key(key: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple((v is not None, "" if v is None else str(v)) for v in key)


def _range(start: int, lo: int, hi: int, rows: pa.Table, spec: RangePartitions) -> list[PartitionPlan]:
    keys, inverse = _key_codes(rows, spec.dimensions)
    order = sorted(range(len(keys)), key=lambda i: _sort_key(keys[i]))
    counts = np.bincount(inverse, minlength=len(keys))
    part_of_key = np.zeros(len(keys), dtype=np.int64)
    firsts: list[tuple[Any, ...]] = []
    filled, part = 0, -1
    for i in order:
        if part < 0 or filled >= spec.target_rows_per_segment:
            part, filled = part + 1, 0
            firsts.append(keys[i])
        part_of_key[i] = part
        filled += int(counts[i])
    row_part = part_of_key[inverse]
    count = len(firsts)
    plans = []
    for p in range(count):
        lower = None if p == 0 else [None if v is None else str(v) for v in firsts[p]]
        upper = None if p == count - 1 else [None if v is None else str(v) for v in firsts[p + 1]]
        shard: dict[str, Any]
        if spec.single_dim:
            shard = {"type": "single", "dimension": spec.dimensions[0],
                     "start": lower[0] if lower else None, "end": upper[0] if upper else None}  # fmt: skip
        else:
            shard = {"type": "range", "dimensions": list(spec.dimensions), "start": lower, "end": upper}
        plans.append(PartitionPlan(start, p, count, lo + np.flatnonzero(row_part == p), shard))
    return plans
