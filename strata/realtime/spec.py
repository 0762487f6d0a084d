"""The real-time node's spec: Druid's `dataSchema` plus the streaming tuning knobs.

Accepted shapes: a full task/supervisor spec (`{"type": ..., "spec": {"dataSchema", "tuningConfig"}}`),
the bare spec object (`{"dataSchema", "tuningConfig"}`), or a bare `dataSchema`. The data schema is
parsed by the batch ingestion's own parser, so both read a schema the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from strata.ingestion.api import read_spec_file
from strata.ingestion.errors import SpecError
from strata.ingestion.flatten import FlattenSpec
from strata.ingestion.input_sources import InlineInputSource
from strata.ingestion.spec import (
    DimensionsSpec,
    GranularitySpec,
    IngestionSpec,
    InputFormat,
    MetricSpec,
    TimestampSpec,
    exact_columns,
    parse_data_schema,
    parse_input_format,
)
from strata.ingestion.transform import TransformSpec
from timeline import Period

REJECTION_POLICIES = ("serverTime", "messageTime", "none")
DEFAULT_MAX_ROWS_IN_MEMORY = 150_000  # Druid's default for streaming ingestion
DEFAULT_MAX_BYTES_IN_MEMORY = 128 * 1024 * 1024


@dataclass(frozen=True)
class RealtimeSpec:
    data_source: str
    timestamp: TimestampSpec
    dimensions: DimensionsSpec
    metrics: tuple[MetricSpec, ...]
    granularity: GranularitySpec
    window_ms: int = 10 * 60_000  # windowPeriod, Druid's default PT10M
    persist_period_ms: int = 10 * 60_000  # intermediatePersistPeriod
    max_rows_in_memory: int = DEFAULT_MAX_ROWS_IN_MEMORY
    max_bytes_in_memory: int = DEFAULT_MAX_BYTES_IN_MEMORY
    rejection_policy: str = "serverTime"
    transform: TransformSpec | None = None
    flatten: FlattenSpec | None = None  # ioConfig.inputFormat.flattenSpec (pushed events are JSON)

    def as_ingestion_spec(self) -> IngestionSpec:
        """The batch spec shape, so the batch row normalizer and rollup apply unchanged."""
        return IngestionSpec(
            data_source=self.data_source,
            timestamp=self.timestamp,
            dimensions=self.dimensions,
            metrics=self.metrics,
            granularity=self.granularity,
            input_source=InlineInputSource(""),
            input_format=InputFormat(
                "json", flatten=self.flatten, exact_columns=exact_columns(self.dimensions)
            ),
            transform=self.transform,
        )

    def facts(self, dimensions: list[dict[str, str]]) -> dict[str, Any]:
        """What a segment file's footer records about how its rows were built."""
        return {
            "dimensions": dimensions,
            "metrics": [m.to_json() for m in self.metrics],
            "queryGranularity": self.granularity.query.to_json(),
            "rollup": self.granularity.rollup,
        }


def _period_ms(value: Any, where: str, default: int) -> int:
    if value is None:
        return default
    try:
        period = Period.parse(str(value))
        if period.years or period.months:
            raise ValueError(f"{value!r} has no fixed length (use days or less)")
        return (period.weeks * 7 + period.days) * 86_400_000 + period.exact_ms
    except ValueError as e:
        raise SpecError(f"tuningConfig.{where}: {e}") from None


def _positive(value: Any, where: str, default: int) -> int:
    if value is None or value == 0:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise SpecError(f"tuningConfig.{where} must be a positive integer, got {value!r}")
    return value


def parse_realtime_spec(obj: Any) -> RealtimeSpec:
    if not isinstance(obj, Mapping):
        raise SpecError("the real-time spec must be a JSON object")
    if "spec" in obj:
        obj = obj["spec"]
        if not isinstance(obj, Mapping):
            raise SpecError("'spec' must be a JSON object")
    schema_obj = obj.get("dataSchema", obj if "dataSource" in obj else None)
    if not isinstance(schema_obj, Mapping):
        raise SpecError("the real-time spec needs a 'dataSchema' object")
    schema = parse_data_schema(schema_obj)
    for m in schema["metrics"]:
        if m.is_sketch:
            raise SpecError(f"metric {m.name!r}: {m.type} is not supported by the real-time node yet")
    if schema["granularity"].segment.is_none:
        raise SpecError("segmentGranularity 'none' would make a segment per millisecond; choose e.g. 'hour'")
    input_format = (
        (obj.get("ioConfig") or {}).get("inputFormat") if isinstance(obj.get("ioConfig"), Mapping) else None
    )
    flatten = None
    if input_format is not None:
        if not isinstance(input_format, Mapping) or input_format.get("type", "json") != "json":
            raise SpecError(
                "ioConfig.inputFormat of the real-time node must be json (pushed events are JSON)"
            )
        flatten = parse_input_format({**input_format, "type": "json"}).flatten
    tuning = obj.get("tuningConfig") or {}
    if not isinstance(tuning, Mapping):
        raise SpecError("tuningConfig must be a JSON object")
    policy = tuning.get("rejectionPolicy", {"type": "serverTime"})
    kind = policy.get("type") if isinstance(policy, Mapping) else policy
    if kind not in REJECTION_POLICIES:
        raise SpecError(
            f"tuningConfig.rejectionPolicy {kind!r} is not supported ({', '.join(REJECTION_POLICIES)})"
        )
    return RealtimeSpec(
        **schema,
        window_ms=_period_ms(tuning.get("windowPeriod"), "windowPeriod", 10 * 60_000),
        persist_period_ms=_period_ms(
            tuning.get("intermediatePersistPeriod"), "intermediatePersistPeriod", 10 * 60_000
        ),
        max_rows_in_memory=_positive(
            tuning.get("maxRowsInMemory"), "maxRowsInMemory", DEFAULT_MAX_ROWS_IN_MEMORY
        ),
        max_bytes_in_memory=_positive(
            tuning.get("maxBytesInMemory"), "maxBytesInMemory", DEFAULT_MAX_BYTES_IN_MEMORY
        ),
        rejection_policy=str(kind),
        flatten=flatten,
    )


def load_realtime_spec(path: str | Path) -> RealtimeSpec:
    return parse_realtime_spec(read_spec_file(path, "real-time spec"))
