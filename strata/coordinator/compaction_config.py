"""Druid's auto-compaction configuration (pure): one DataSourceCompactionConfig per data source, in
one CoordinatorCompactionConfig document with the compaction task slots.

A posted config needs only `dataSource`; the rest takes Druid's defaults (`taskPriority` 25,
`inputSegmentSizeBytes` 100 TB, `skipOffsetFromLatest` P1D, dynamic partitions of 5,000,000 rows)
and is checked as the compact task it becomes would be, so a config that could never run is a 400
when it is posted, not a failing task every period. What a compacted segment records
(`lastCompactionState`) is compared with what the config asks (`wanted_state`): a segment is
compacted when every field the config sets matches.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from strata.coordinator.compaction_spec import COMPACT_PRIORITY, partitions_json
from strata.ingestion.errors import SpecError
from strata.ingestion.spec import parse_dimensions_spec, parse_metric, parse_partitions
from timeline import Granularity, Period

CONFIG_KEY = "coordinator.compaction.config"  # Druid's CoordinatorCompactionConfig.CONFIG_KEY
DEFAULT_INPUT_BYTES = 100_000_000_000_000
DEFAULT_SKIP_OFFSET = "P1D"
MAX_SLOTS = 2_147_483_647
GLOBAL_DEFAULTS = {
    "compactionTaskSlotRatio": 0.1,
    "maxCompactionTaskSlots": MAX_SLOTS,
    "useAutoScaleSlots": False,
}
_FIELDS = ("tuningConfig", "granularitySpec", "dimensionsSpec", "transformSpec", "ioConfig", "taskContext")


class ConfigError(ValueError):
    """A config Druid would refuse (the API answers 400 `{"error": message}`)."""


def _int(value: Any, what: str, default: int, minimum: int) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"'{what}' must be an integer of at least {minimum}, got {value!r}")
    return value


def _object(value: Any, what: str) -> Mapping[str, Any] | None:
    if value is not None and not isinstance(value, Mapping):
        raise ConfigError(f"'{what}' must be a JSON object, got {value!r}")
    return value


def parse_datasource_config(body: Any) -> dict[str, Any]:
    """A posted DataSourceCompactionConfig, checked, with Druid's defaults filled in."""
    if not isinstance(body, Mapping):
        raise ConfigError("the compaction config must be a JSON object")
    ds = body.get("dataSource")
    if not isinstance(ds, str) or not ds:
        raise ConfigError("'dataSource' is required")
    offset = body.get("skipOffsetFromLatest", DEFAULT_SKIP_OFFSET)
    try:
        Period.parse(str(offset))
    except ValueError as e:
        raise ConfigError(f"'skipOffsetFromLatest': {e}") from None
    out: dict[str, Any] = {
        "dataSource": ds,
        "taskPriority": _int(body.get("taskPriority"), "taskPriority", COMPACT_PRIORITY, 0),
        "inputSegmentSizeBytes": _int(
            body.get("inputSegmentSizeBytes"), "inputSegmentSizeBytes", DEFAULT_INPUT_BYTES, 1
        ),
        "maxRowsPerSegment": body.get("maxRowsPerSegment"),
        "skipOffsetFromLatest": str(offset),
    }
    for field in _FIELDS:
        out[field] = _object(body.get(field), field)
    metrics = body.get("metricsSpec")
    if metrics is not None and not isinstance(metrics, list):
        raise ConfigError(f"'metricsSpec' must be a JSON array, got {metrics!r}")
    out["metricsSpec"] = metrics
    if out["maxRowsPerSegment"] is not None:
        _int(out["maxRowsPerSegment"], "maxRowsPerSegment", 0, 1)
    if (out["ioConfig"] or {}).get("dropExisting") is True:
        raise ConfigError("ioConfig.dropExisting is not supported: chunks without rows keep their segments")
    transform = out["transformSpec"] or {}
    if transform.get("filter") or transform.get("transforms"):
        raise ConfigError("transformSpec is not supported by the compact task yet")
    gran = out["granularitySpec"] or {}
    try:
        for key in ("segmentGranularity", "queryGranularity"):
            if gran.get(key) is not None:
                Granularity.parse(gran[key])
        parse_partitions(tuning_of(out))
        parse_dimensions_spec(out["dimensionsSpec"] or {})
        for m in out["metricsSpec"] or []:
            parse_metric(m)
    except (ValueError, SpecError) as e:
        raise ConfigError(str(e)) from None
    return out


def tuning_of(config: Mapping[str, Any]) -> dict[str, Any]:
    """The compact task's tuningConfig; the deprecated top-level `maxRowsPerSegment` as Druid reads it."""
    tuning = dict(config.get("tuningConfig") or {})
    if config.get("maxRowsPerSegment") is not None and "partitionsSpec" not in tuning:
        tuning["partitionsSpec"] = {"type": "dynamic", "maxRowsPerSegment": config["maxRowsPerSegment"]}
    tuning.setdefault("type", "index_parallel")
    return tuning


def global_config(document: Any) -> dict[str, Any]:
    """The stored CoordinatorCompactionConfig, or Druid's empty default."""
    doc = dict(document or {})
    return {"compactionConfigs": list(doc.get("compactionConfigs") or []),
            **{k: doc.get(k, v) for k, v in GLOBAL_DEFAULTS.items()}}  # fmt: skip


def with_datasource(document: Any, config: dict[str, Any]) -> dict[str, Any]:
    doc = global_config(document)
    others = [c for c in doc["compactionConfigs"] if c["dataSource"] != config["dataSource"]]
    return {**doc, "compactionConfigs": [*others, config]}


def without_datasource(document: Any, ds: str) -> dict[str, Any]:
    doc = global_config(document)
    kept = [c for c in doc["compactionConfigs"] if c["dataSource"] != ds]
    if len(kept) == len(doc["compactionConfigs"]):
        raise KeyError(ds)
    return {**doc, "compactionConfigs": kept}


def with_slots(document: Any, ratio: float | None, most: int | None, auto: bool | None) -> dict[str, Any]:
    doc = global_config(document)
    if ratio is not None:
        if not 0 <= ratio <= 1:
            raise ConfigError(f"compactionTaskSlotRatio must be between 0 and 1, got {ratio}")
        doc["compactionTaskSlotRatio"] = ratio
    if most is not None:
        if most < 0:
            raise ConfigError(f"maxCompactionTaskSlots must not be negative, got {most}")
        doc["maxCompactionTaskSlots"] = most
    if auto is not None:
        doc["useAutoScaleSlots"] = auto
    return doc


def task_capacity(document: Mapping[str, Any], task_slots: int) -> int:
    """Druid's compaction task capacity: the ratio of the task slots, at most the maximum, at least one."""
    ratio, most = float(document["compactionTaskSlotRatio"]), int(document["maxCompactionTaskSlots"])
    return max(1, min(int(task_slots * ratio), most))


def history(entries: Sequence[Mapping[str, Any]], ds: str) -> list[dict[str, Any]]:
    """Druid's DataSourceCompactionConfigHistory: an entry per change of the data source's config
    (or of the global settings while it has one), from the audit entries of the whole document."""
    out: list[dict[str, Any]] = []
    last: tuple[Any, Any] | None = None
    for entry in entries:
        doc = global_config(orjson.loads(entry["payload"]))
        mine = next((c for c in doc["compactionConfigs"] if c["dataSource"] == ds), None)
        glob = {k: doc[k] for k in GLOBAL_DEFAULTS}
        if mine is None:
            last = None
            continue
        if last != (mine, glob):
            out.append({"globalConfig": glob, "compactionConfig": mine, "auditInfo": entry["auditInfo"],
                        "auditTime": entry["auditTime"]})  # fmt: skip
        last = (mine, glob)
    return out


def wanted_state(config: Mapping[str, Any]) -> dict[str, Any]:
    """The `lastCompactionState` fields a segment must have to count as compacted by `config`."""
    gran = config.get("granularitySpec") or {}
    out: dict[str, Any] = {"partitionsSpec": partitions_json(parse_partitions(tuning_of(config)))}
    for key in ("segmentGranularity", "queryGranularity"):
        if gran.get(key) is not None:
            out[key] = Granularity.parse(gran[key]).to_json()
    if gran.get("rollup") is not None:
        out["rollup"] = bool(gran["rollup"])
    dims = (config.get("dimensionsSpec") or {}).get("dimensions")
    if dims:
        out["dimensions"] = [d.name for d in parse_dimensions_spec({"dimensions": dims}).dimensions]
    if config.get("metricsSpec") is not None:
        out["metricsSpec"] = [parse_metric(m).to_json() for m in config["metricsSpec"]]
    return out


def state_matches(state: Any, wanted: Mapping[str, Any]) -> bool:
    if not isinstance(state, Mapping):
        return False
    gran = state.get("granularitySpec") or {}
    have = {
        "partitionsSpec": state.get("partitionsSpec"),
        "segmentGranularity": gran.get("segmentGranularity"),
        "queryGranularity": gran.get("queryGranularity"),
        "rollup": gran.get("rollup"),
        "dimensions": [d.get("name") for d in (state.get("dimensionsSpec") or {}).get("dimensions") or []],
        "metricsSpec": state.get("metricsSpec"),
    }
    return all(have[k] == v for k, v in wanted.items())
