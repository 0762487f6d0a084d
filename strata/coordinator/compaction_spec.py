"""Druid's `compact` task, parsed (pure): which data source and interval it rewrites, and how.

`ioConfig.inputSpec` is `{"type": "interval", "interval": ...}` (every segment in it) or
`{"type": "segments", "segments": [ids]}` (those segments, which must be all the used segments of
their umbrella interval); `granularitySpec` (or the deprecated top-level `segmentGranularity`)
sets the new segment and query granularity and rollup, `tuningConfig` the partitionsSpec,
`dimensionsSpec` and `metricsSpec` the columns; whatever is not given is kept from the segments.
As in Druid, an explicit segment granularity must align with the interval unless
`ioConfig.allowNonAlignedInterval`, and the task locks the interval it rewrites (priority 25).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from strata.coordinator.task_types import InvalidTask, TaskPlan
from strata.ingestion.errors import SpecError
from strata.ingestion.spec import (
    DynamicPartitions,
    HashedPartitions,
    MetricSpec,
    PartitionsSpec,
    RangePartitions,
    parse_dimensions_spec,
    parse_metric,
    parse_partitions,
)
from timeline import Granularity, Interval, parse_instant

COMPACT_PRIORITY = 25  # Druid's default priority of compaction tasks


@dataclass(frozen=True)
class CompactionSpec:
    data_source: str
    interval: Interval
    segment_ids: tuple[str, ...] | None  # a `segments` inputSpec
    segment_granularity: Granularity | None  # None: keep the segments' own
    query_granularity: Granularity | None
    rollup: bool | None
    dimensions: tuple[Mapping[str, Any], ...] | None  # dimensionsSpec.dimensions as given
    dimension_exclusions: tuple[str, ...]
    metrics: tuple[MetricSpec, ...] | None
    partitions: PartitionsSpec


def _obj(value: Any, what: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidTask(f"'{what}' must be a JSON object, got {value!r}")
    return value


def _interval(value: Any, what: str) -> Interval:
    if not isinstance(value, str):
        raise InvalidTask(f"the compact task needs '{what}' as an ISO-8601 interval")
    try:
        interval = Interval.parse(value)
    except ValueError as e:
        raise InvalidTask(f"Invalid value for field [{what}]: {e}") from None
    if interval.is_empty:
        raise InvalidTask(f"Interval[{value}] is empty, must specify a nonempty interval")
    return interval


def segment_interval(data_source: str, segment_id: str) -> Interval:
    """The interval in a segment id `<dataSource>_<start>_<end>_<version>[_<partition>]`."""
    prefix = f"{data_source}_"
    parts = segment_id[len(prefix) :].split("_", 2) if segment_id.startswith(prefix) else []
    try:
        return Interval(parse_instant(parts[0]), parse_instant(parts[1]))
    except (IndexError, ValueError):
        raise InvalidTask(f"segment id [{segment_id}] is not a segment of [{data_source}]") from None


def _input(io: Mapping[str, Any], ds: str) -> tuple[Interval, tuple[str, ...] | None]:
    spec = _obj(io.get("inputSpec"), "ioConfig.inputSpec")
    kind = spec.get("type")
    if kind == "interval":
        return _interval(spec.get("interval"), "ioConfig.inputSpec.interval"), None
    if kind == "segments":
        ids = spec.get("segments")
        if not isinstance(ids, list) or not ids or not all(isinstance(i, str) for i in ids):
            raise InvalidTask("a segments inputSpec needs 'segments', a non-empty list of segment ids")
        spans = [segment_interval(ds, i) for i in ids]
        return Interval(min(s.start for s in spans), max(s.end for s in spans)), tuple(dict.fromkeys(ids))
    raise InvalidTask(f"ioConfig.inputSpec type [{kind}] is not supported (interval or segments)")


def _granularity(value: Any, what: str) -> Granularity | None:
    if value is None:
        return None
    try:
        return Granularity.parse(value)
    except ValueError as e:
        raise InvalidTask(f"{what}: {e}") from None


def aligned(granularity: Granularity, interval: Interval) -> bool:
    """Whether the interval is a whole number of the granularity's buckets."""
    return all(interval.contains(b) for b in granularity.buckets(interval))


def parse_compaction(body: Mapping[str, Any]) -> CompactionSpec:
    ds = body.get("dataSource")
    if not isinstance(ds, str) or not ds:
        raise InvalidTask("the compact task needs 'dataSource'")
    io = _obj(body.get("ioConfig"), "ioConfig")
    if not io:
        raise InvalidTask("the compact task needs 'ioConfig' with an 'inputSpec'")
    if io.get("dropExisting") is True or str(io.get("dropExisting")).lower() == "true":
        raise InvalidTask("ioConfig.dropExisting is not supported: chunks without rows keep their segments")
    interval, ids = _input(io, ds)
    gran = _obj(body.get("granularitySpec"), "granularitySpec")
    segment = _granularity(gran.get("segmentGranularity"), "granularitySpec.segmentGranularity")
    legacy = _granularity(body.get("segmentGranularity"), "segmentGranularity")
    if legacy is not None and segment is not None and legacy != segment:
        raise InvalidTask("segmentGranularity and granularitySpec.segmentGranularity differ: give only one")
    segment = segment or legacy
    if segment is not None and segment.is_none:
        raise InvalidTask("segmentGranularity 'none' would make a segment per millisecond")
    allow = io.get("allowNonAlignedInterval") is True
    if segment is not None and not allow and not aligned(segment, interval):
        raise InvalidTask(
            f"Interval[{interval}] to compact is not aligned with segmentGranularity[{segment}]"
        )
    transform = _obj(body.get("transformSpec"), "transformSpec")
    if transform.get("filter") or transform.get("transforms"):
        raise InvalidTask("transformSpec is not supported by the compact task yet")
    rollup = gran.get("rollup")
    if rollup is not None and not isinstance(rollup, bool):
        raise InvalidTask(f"granularitySpec.rollup must be true or false, got {rollup!r}")
    try:
        dims_obj = _obj(body.get("dimensionsSpec"), "dimensionsSpec")
        parse_dimensions_spec(dims_obj)  # refuses what a native spec refuses
        given = dims_obj.get("dimensions")
        metrics = body.get("metricsSpec")
        parsed_metrics = None if metrics is None else tuple(parse_metric(m) for m in metrics)
        partitions = parse_partitions(_obj(body.get("tuningConfig"), "tuningConfig"))
    except SpecError as e:
        raise InvalidTask(str(e)) from None
    return CompactionSpec(
        data_source=ds,
        interval=interval,
        segment_ids=ids,
        segment_granularity=segment,
        query_granularity=_granularity(gran.get("queryGranularity"), "granularitySpec.queryGranularity"),
        rollup=rollup,
        dimensions=tuple(d if isinstance(d, Mapping) else {"name": d} for d in given) if given else None,
        dimension_exclusions=tuple(str(x) for x in dims_obj.get("dimensionExclusions") or ()),
        metrics=parsed_metrics,
        partitions=partitions,
    )


def plan_compact(body: Mapping[str, Any]) -> TaskPlan:
    """A compact task rewrites (replaces) its interval: it locks it as Druid's does."""
    spec = parse_compaction(body)
    return TaskPlan(spec.data_source, (spec.interval,), replaces=True)


def partitions_json(partitions: PartitionsSpec) -> dict[str, Any]:
    """A partitionsSpec as Druid writes it into a segment's `lastCompactionState`."""
    if isinstance(partitions, DynamicPartitions):
        return {"type": "dynamic", "maxRowsPerSegment": partitions.max_rows_per_segment, "maxTotalRows": None}
    if isinstance(partitions, HashedPartitions):
        target = None if partitions.num_shards else partitions.target_rows_per_segment
        keys = list(partitions.partition_dimensions)
        return {"type": "hashed", "numShards": partitions.num_shards, "partitionDimensions": keys,
                "targetRowsPerSegment": target}  # fmt: skip
    assert isinstance(partitions, RangePartitions)
    kind = "single_dim" if partitions.single_dim else "range"
    dims: dict[str, Any] = (
        {"partitionDimension": partitions.dimensions[0]}
        if partitions.single_dim
        else {"partitionDimensions": list(partitions.dimensions)}
    )
    return {"type": kind, **dims, "targetRowsPerSegment": partitions.target_rows_per_segment}
