"""What a compact task reads and the ingestion spec it runs (pure, but for reading footers).

The input is what queries see: the used segments' timeline over the interval, complete partition
sets only, each segment read only over the parts of its interval no newer version overshadows
(Druid's `druid` input source reads the same). Every such segment must lie inside the interval.
The spec keeps whatever the task does not set: the dimensions (with their types) and metrics of
the segments' footers, their query granularity and rollup when they agree, and their segment
granularity when each segment is one bucket of a standard granularity. Metrics are re-aggregated
with Druid's combining aggregators (a `count` becomes a `longSum` of itself), so rolling up
compacted rows again gives the same totals.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from strata.coordinator.compaction_spec import CompactionSpec, partitions_json
from strata.coordinator.task_context import TaskFailed
from strata.ingestion.errors import SpecError
from strata.ingestion.input_sources import SegmentFile, SegmentsInputSource
from strata.ingestion.spec import (
    DIMENSION_TYPES,
    DimensionSpec,
    DimensionsSpec,
    GranularitySpec,
    IngestionSpec,
    InputFormat,
    MetricSpec,
    TimestampSpec,
    TuningConfig,
    parse_dimensions_spec,
    parse_metric,
)
from timeline import (
    NONE,
    DataSegment,
    Granularity,
    Interval,
    OverlappingSameVersionError,
    VersionedIntervalTimeline,
)

STANDARD = ("minute", "five_minute", "ten_minute", "fifteen_minute", "thirty_minute", "hour", "six_hour",
            "eight_hour", "day", "week", "month", "quarter", "year")  # fmt: skip
_SUMS = (
    "longSum",
    "doubleSum",
    "floatSum",
    "longMin",
    "longMax",
    "doubleMin",
    "doubleMax",
    "floatMin",
    "floatMax",
)


@dataclass(frozen=True)
class CompactionInput:
    segment: DataSegment
    keep: tuple[Interval, ...]  # the visible parts of its interval


def visible_inputs(used: Sequence[DataSegment], spec: CompactionSpec) -> list[CompactionInput]:
    """The segments a compaction of `spec.interval` reads, with the parts of them it reads."""
    timeline: VersionedIntervalTimeline[DataSegment] = VersionedIntervalTimeline()
    for s in used:
        if s.data_source == spec.data_source and s.shard_spec.has_data:
            try:
                timeline.add_segment(s, s)
            except OverlappingSameVersionError:
                continue
    keep: dict[str, list[Interval]] = {}
    segments: dict[str, DataSegment] = {}
    for holder in timeline.lookup(spec.interval):
        for s in holder.objects:
            if not spec.interval.contains(s.interval):
                raise TaskFailed(
                    f"segment [{s.id}] extends beyond the interval to compact [{spec.interval}]: "
                    "compact an interval covering whole segments"
                )
            keep.setdefault(s.id, []).append(holder.interval)
            segments[s.id] = s
    if spec.segment_ids is not None and set(spec.segment_ids) != set(segments):
        raise TaskFailed(
            "Specified segments in the spec are different from the current used segments. Possibly new "
            f"segments would have been added or some segments have been unpublished: given "
            f"{sorted(spec.segment_ids)}, used and visible {sorted(segments)}"
        )
    return [CompactionInput(segments[sid], tuple(ivs)) for sid, ivs in keep.items()]


def inferred_granularity(inputs: Sequence[CompactionInput]) -> Granularity:
    """The standard granularity of which every input segment is exactly one bucket."""
    for name in STANDARD:
        g = Granularity.parse(name)
        if all(Interval(g.bucket_start(i.segment.interval.start), g.bucket_end(i.segment.interval.start))
               == i.segment.interval for i in inputs):  # fmt: skip
            return g
    raise TaskFailed("the segments to compact are of different granularities: give "
                     "granularitySpec.segmentGranularity")  # fmt: skip


def _combining(metric: Mapping[str, Any]) -> dict[str, Any]:
    """Druid's combining factory: the aggregator that merges values this metric already holds."""
    kind, name = metric.get("type"), str(metric.get("name"))
    if kind == "count":
        return {"type": "longSum", "name": name, "fieldName": name}
    if kind in _SUMS:
        return {"type": kind, "name": name, "fieldName": name}
    raise TaskFailed(f"metric [{name}] ({kind}) cannot be compacted yet: give a metricsSpec without it")


def _dimensions(
    spec: CompactionSpec, facts: Sequence[Mapping[str, Any]], names: set[str]
) -> list[DimensionSpec]:
    if spec.dimensions is not None:
        try:
            return list(parse_dimensions_spec({"dimensions": list(spec.dimensions)}).dimensions)
        except SpecError as e:
            raise TaskFailed(str(e)) from None
    out: dict[str, DimensionSpec] = {}
    for f in facts:  # newest data first: its order and types win, as Druid's
        for d in f.get("dimensions") or []:
            d = d if isinstance(d, Mapping) else {"name": d}
            name, kind = str(d["name"]), str(d.get("type", "string"))
            if name in out or name in spec.dimension_exclusions or name in names:
                continue
            if kind not in DIMENSION_TYPES:
                raise TaskFailed(f"dimension [{name}] of type [{kind}] cannot be compacted yet")
            out[name] = DimensionSpec(name, kind)
    return list(out.values())


def _agree(values: Sequence[Any], default: Any) -> Any:
    distinct = {repr(v) for v in values}
    return values[0] if len(distinct) == 1 else default


def ingestion_spec(
    spec: CompactionSpec,
    inputs: Sequence[CompactionInput],
    facts: Sequence[Mapping[str, Any]],
    paths: Sequence[str],
) -> tuple[IngestionSpec, dict[str, Any]]:
    """The ingestion the compaction runs over `paths` (the inputs' files, in order; `facts` their
    footers), and the `lastCompactionState` its segments record."""
    newest_first = sorted(range(len(inputs)), key=lambda i: inputs[i].segment.interval, reverse=True)
    ordered = [facts[i] for i in newest_first]
    if spec.metrics is not None:
        metrics = list(spec.metrics)
    else:
        combined: dict[str, MetricSpec] = {}
        for f in ordered:
            for m in f.get("metrics") or []:
                if str(m.get("name")) not in combined:
                    combined[str(m["name"])] = parse_metric(_combining(m))
        metrics = list(combined.values())
    dims = _dimensions(spec, ordered, {m.name for m in metrics})
    granularity = spec.segment_granularity or inferred_granularity(inputs)
    query = spec.query_granularity
    if query is None:
        query = _agree([Granularity.parse(f.get("queryGranularity") or "none") for f in facts], NONE)
    rollup = spec.rollup if spec.rollup is not None else all(bool(f.get("rollup")) for f in facts)
    files = tuple(SegmentFile(p, i.keep) for p, i in zip(paths, inputs, strict=True))
    ingestion = IngestionSpec(
        data_source=spec.data_source,
        timestamp=TimestampSpec("__time", "millis"),
        dimensions=DimensionsSpec(tuple(dims)),
        metrics=tuple(metrics),
        granularity=GranularitySpec(granularity, query, rollup, (spec.interval,)),
        input_source=SegmentsInputSource(files),
        input_format=InputFormat("parquet"),
        tuning=TuningConfig(partitions=spec.partitions),
    )
    state = {
        "partitionsSpec": partitions_json(spec.partitions),
        "dimensionsSpec": {"dimensions": [{"name": d.name, "type": d.type} for d in dims]},
        "metricsSpec": [m.to_json() for m in metrics],
        "transformSpec": None,
        "indexSpec": {},
        "granularitySpec": {
            "segmentGranularity": granularity.to_json(),
            "queryGranularity": query.to_json(),
            "rollup": rollup,
        },
    }
    return ingestion, state
