"""Druid's native batch ingestion spec (`index_parallel` / `index`) parsed into typed, frozen objects.

Accepts the task form `{"type": "index_parallel", "spec": {...}}` and the bare spec object. Fields
Strata cannot honour are refused with a clear message rather than silently ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from strata.ingestion.errors import SpecError
from strata.ingestion.flatten import FlattenSpec, parse_flatten_spec
from strata.ingestion.input_sources import DruidInputSource, InputSource, parse_input_source
from strata.ingestion.row_stage import RowStage
from strata.ingestion.transform import TransformSpec, parse_transform_spec
from timeline import Granularity, Interval, parse_instant

DEFAULT_MAX_PARSE_EXCEPTIONS = 0
"""Strata fails an ingestion at the first unparseable row unless the spec allows more.

Druid's default is unlimited (Integer.MAX_VALUE: bad rows are skipped and counted). Strata chooses
0 because a silently shortened data source gives wrong answers that nobody notices; set
`tuningConfig.maxParseExceptions` (e.g. 2147483647) to get Druid's skip-and-count behaviour.
"""
UNLIMITED = 2**31 - 1  # Druid's Integer.MAX_VALUE
DEFAULT_MAX_ROWS_PER_SEGMENT = 5_000_000  # Druid's dynamic partitionsSpec default

DIMENSION_TYPES = ("string", "long", "float", "double", "auto", "json")
MULTI_VALUE_HANDLING = ("SORTED_ARRAY", "SORTED_SET", "ARRAY")
TIMESTAMP_FORMATS = ("iso", "millis", "posix", "micro", "nano", "auto")
METRIC_TYPES = (
    "count", "longSum", "doubleSum", "floatSum", "longMin", "longMax", "doubleMin", "doubleMax",
    "floatMin", "floatMax", "HLLSketchBuild", "thetaSketch",
)  # fmt: skip
SKETCH_TYPES = ("HLLSketchBuild", "thetaSketch")


@dataclass(frozen=True)
class TimestampSpec:
    column: str = "timestamp"
    format: str = "auto"
    missing_value: int | None = None


@dataclass(frozen=True)
class DimensionSpec:
    name: str
    type: str = "string"
    multi_value_handling: str = "SORTED_ARRAY"  # string dimensions: how a row's list of values is kept

    @property
    def typed_by_values(self) -> bool:
        """`auto` and `json` dimensions: the column's type comes from its values (per segment)."""
        return self.type in ("auto", "json")


@dataclass(frozen=True)
class DimensionsSpec:
    dimensions: tuple[DimensionSpec, ...] = ()
    exclusions: tuple[str, ...] = ()
    use_schema_discovery: bool = False

    @property
    def discover(self) -> bool:
        """Whether input columns not listed become dimensions too: always with `useSchemaDiscovery`
        (as `auto` dimensions), else when the list is empty (as string dimensions)."""
        return self.use_schema_discovery or not self.dimensions


@dataclass(frozen=True)
class MetricSpec:
    type: str
    name: str
    field_name: str | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False)

    @property
    def is_sketch(self) -> bool:
        return self.type in SKETCH_TYPES

    def to_json(self) -> dict[str, Any]:
        return dict(self.raw)


@dataclass(frozen=True)
class GranularitySpec:
    segment: Granularity
    query: Granularity
    rollup: bool = True
    intervals: tuple[Interval, ...] = ()


@dataclass(frozen=True)
class InputFormat:
    type: str  # json | csv | tsv | parquet
    columns: tuple[str, ...] = ()
    find_columns_from_header: bool = False
    skip_header_rows: int = 0
    delimiter: str = ","
    list_delimiter: str | None = None  # csv / tsv: splits a value into a multi-value list
    flatten: FlattenSpec | None = None
    exact_columns: frozenset[str] | None = frozenset()
    """JSON columns that type `auto` / `json` dimensions (None: every column, as with
    useSchemaDiscovery): read value by value where Arrow's reader would unify their numbers (`1`
    beside `2.5` read as `1.0`), so each segment types them from the values as written."""

    # JSON fields read as text whatever they look like (a SQL ingestion's VARCHAR columns: Arrow
    # would otherwise read "2020-01-01" as a timestamp, and the text would be lost)
    text_fields: tuple[str, ...] = ()


def exact_columns(dims: DimensionsSpec) -> frozenset[str] | None:
    """The input columns whose values must reach `auto` / `json` dimensions as written."""
    if dims.use_schema_discovery:
        return None
    return frozenset(d.name for d in dims.dimensions if d.typed_by_values)


@dataclass(frozen=True)
class DynamicPartitions:
    max_rows_per_segment: int = DEFAULT_MAX_ROWS_PER_SEGMENT


@dataclass(frozen=True)
class HashedPartitions:
    num_shards: int | None = None
    partition_dimensions: tuple[str, ...] = ()
    target_rows_per_segment: int = DEFAULT_MAX_ROWS_PER_SEGMENT


@dataclass(frozen=True)
class RangePartitions:
    dimensions: tuple[str, ...]
    target_rows_per_segment: int
    single_dim: bool = False  # `single_dim` writes Druid's `single` shard specs, `range` writes `range`


PartitionsSpec = DynamicPartitions | HashedPartitions | RangePartitions


@dataclass(frozen=True)
class TuningConfig:
    partitions: PartitionsSpec = field(default_factory=DynamicPartitions)
    max_parse_exceptions: int = DEFAULT_MAX_PARSE_EXCEPTIONS


@dataclass(frozen=True)
class IngestionSpec:
    data_source: str
    timestamp: TimestampSpec
    dimensions: DimensionsSpec
    metrics: tuple[MetricSpec, ...]
    granularity: GranularitySpec
    input_source: InputSource
    input_format: InputFormat
    append: bool = False
    tuning: TuningConfig = field(default_factory=TuningConfig)
    transform: TransformSpec | None = None
    # what SQL ingestion adds (strata.coordinator.sql_task builds such specs; no JSON spec names them)
    row_stage: RowStage | None = None  # the statement's per-row part, run on each block first
    strict_time: bool = False  # a null or out-of-bounds time fails the ingestion instead of the row
    replace: tuple[Interval, ...] | None = None  # drop every used segment inside these at the publish
    allow_empty: bool = False  # no rows is a success: nothing published, or only `replace`'s drops


# -- parsing --------------------------------------------------------------------------------------
def _obj(value: Any, where: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise SpecError(f"{where} must be a JSON object, got {type(value).__name__}")
    return value


def _int(value: Any, where: str, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or int(value) != value:
        raise SpecError(f"{where} must be an integer, got {value!r}")
    if value < minimum:
        raise SpecError(f"{where} must be at least {minimum}, got {value}")
    return int(value)


def _granularity(value: Any, default: str, where: str) -> Granularity:
    if isinstance(value, Mapping) and value.get("type") == "uniform":
        value = value.get("granularity")
    try:
        return Granularity.parse(default if value is None else value)
    except ValueError as e:
        raise SpecError(f"{where}: {e}") from None


def parse_timestamp_spec(obj: Mapping[str, Any]) -> TimestampSpec:
    fmt = str(obj.get("format", "auto"))
    if fmt.lower() in TIMESTAMP_FORMATS:
        fmt = fmt.lower()
    else:
        raise SpecError(
            f"timestampSpec.format {fmt!r} is not supported (use one of {', '.join(TIMESTAMP_FORMATS)})"
        )
    missing = obj.get("missingValue")
    missing_ms: int | None = None
    if missing is not None:
        try:
            missing_ms = int(missing) if isinstance(missing, (int, float)) else parse_instant(str(missing))
        except ValueError as e:
            raise SpecError(f"timestampSpec.missingValue: {e}") from None
    return TimestampSpec(str(obj.get("column", "timestamp")), fmt, missing_ms)


def _dimension(d: Mapping[str, Any]) -> DimensionSpec:
    kind = str(d.get("type", "string"))
    if kind not in DIMENSION_TYPES:
        raise SpecError(
            f"dimension {d['name']!r}: type {kind!r} is not supported ({', '.join(DIMENSION_TYPES)})"
        )
    handling = str(d.get("multiValueHandling") or "SORTED_ARRAY").upper()
    if handling not in MULTI_VALUE_HANDLING:
        choices = ", ".join(MULTI_VALUE_HANDLING)
        raise SpecError(f"dimension {d['name']!r}: multiValueHandling {handling!r} is not one of {choices}")
    if d.get("castToType") is not None:
        raise SpecError(
            f"dimension {d['name']!r}: 'castToType' is not supported yet; declare a typed dimension"
        )
    return DimensionSpec(d["name"], kind, handling)


def parse_dimensions_spec(obj: Mapping[str, Any]) -> DimensionsSpec:
    dims: list[DimensionSpec] = []
    for d in obj.get("dimensions") or []:
        if isinstance(d, str):
            dims.append(DimensionSpec(d))
        elif isinstance(d, Mapping) and isinstance(d.get("name"), str):
            dims.append(_dimension(d))
        else:
            raise SpecError(f"dimensionsSpec.dimensions: expected a name or {{'name','type'}}, got {d!r}")
    names = [d.name for d in dims]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise SpecError(f"dimensionsSpec lists dimensions more than once: {', '.join(dupes)}")
    if "__time" in names:
        raise SpecError("'__time' is reserved for the timestamp and cannot be a dimension")
    if obj.get("includeAllDimensions"):
        raise SpecError("dimensionsSpec.includeAllDimensions is not supported yet; use useSchemaDiscovery")
    return DimensionsSpec(
        tuple(dims),
        tuple(str(x) for x in obj.get("dimensionExclusions") or ()),
        use_schema_discovery=bool(obj.get("useSchemaDiscovery", False)),
    )


def parse_metric(obj: Any) -> MetricSpec:
    if not isinstance(obj, Mapping) or not isinstance(obj.get("name"), str):
        raise SpecError(f"metricsSpec entries need a 'type' and a 'name': {obj!r}")
    kind = obj.get("type")
    if kind not in METRIC_TYPES:
        raise SpecError(
            f"metric {obj['name']!r}: aggregator type {kind!r} is not supported at ingestion "
            f"({', '.join(METRIC_TYPES)})"
        )
    if obj.get("expression") is not None:
        raise SpecError(f"metric {obj['name']!r}: 'expression' is not supported; use 'fieldName'")
    field_name = obj.get("fieldName")
    if kind != "count" and not isinstance(field_name, str):
        raise SpecError(f"metric {obj['name']!r} ({kind}) needs a 'fieldName'")
    return MetricSpec(str(kind), obj["name"], field_name if kind != "count" else None, dict(obj))


def parse_granularity_spec(obj: Mapping[str, Any]) -> GranularitySpec:
    intervals: list[Interval] = []
    for text in obj.get("intervals") or []:
        try:
            intervals.append(Interval.parse(text))
        except ValueError as e:
            raise SpecError(f"granularitySpec.intervals: {e}") from None
    return GranularitySpec(
        segment=_granularity(obj.get("segmentGranularity"), "day", "segmentGranularity"),
        query=_granularity(obj.get("queryGranularity"), "none", "queryGranularity"),
        rollup=bool(obj.get("rollup", True)),
        intervals=tuple(intervals),
    )


def parse_input_format(obj: Mapping[str, Any]) -> InputFormat:
    kind = obj.get("type")
    if kind not in ("json", "csv", "tsv", "parquet"):
        raise SpecError(f"inputFormat type {kind!r} is not supported (json, csv, tsv, parquet)")
    flatten = parse_flatten_spec(obj.get("flattenSpec"), str(kind))
    columns = tuple(str(c) for c in obj.get("columns") or ())
    from_header = bool(obj.get("findColumnsFromHeader", False))
    if kind in ("csv", "tsv") and not columns and not from_header:
        raise SpecError(f"{kind} inputFormat needs 'columns' or 'findColumnsFromHeader': true")
    delimiter = str(obj.get("delimiter", "\t" if kind == "tsv" else ","))
    if kind in ("csv", "tsv") and len(delimiter) != 1:
        raise SpecError(f"{kind} delimiter must be one character, got {delimiter!r}")
    list_delimiter = obj.get("listDelimiter", "\x01") if kind in ("csv", "tsv") else None
    if list_delimiter is not None and (not isinstance(list_delimiter, str) or not list_delimiter):
        raise SpecError(f"{kind} listDelimiter must be a non-empty string, got {list_delimiter!r}")
    if list_delimiter == delimiter:
        raise SpecError(f"{kind} listDelimiter cannot be the column delimiter {delimiter!r}")
    return InputFormat(
        str(kind), columns, from_header, _int(obj.get("skipHeaderRows", 0), "skipHeaderRows"), delimiter,
        list_delimiter=list_delimiter, flatten=flatten,
    )  # fmt: skip


def parse_partitions(tuning: Mapping[str, Any]) -> PartitionsSpec:
    spec = tuning.get("partitionsSpec")
    if spec is None:  # legacy: maxRowsPerSegment / numShards at the top of tuningConfig
        if tuning.get("numShards") is not None:
            dims = tuple(tuning.get("partitionDimensions") or ())
            return HashedPartitions(_int(tuning["numShards"], "numShards", 1), dims)
        rows = tuning.get("maxRowsPerSegment")
        return DynamicPartitions(
            DEFAULT_MAX_ROWS_PER_SEGMENT if rows is None else _int(rows, "maxRowsPerSegment", 1)
        )
    spec = _obj(spec, "partitionsSpec")
    kind = spec.get("type")
    if kind == "dynamic":
        rows = spec.get("maxRowsPerSegment")
        return DynamicPartitions(
            DEFAULT_MAX_ROWS_PER_SEGMENT if rows is None else _int(rows, "maxRowsPerSegment", 1)
        )
    if kind == "hashed":
        shards = spec.get("numShards")
        target = spec.get("targetRowsPerSegment") or spec.get("maxRowsPerSegment")
        return HashedPartitions(
            None if shards is None else _int(shards, "numShards", 1),
            tuple(str(d) for d in spec.get("partitionDimensions") or ()),
            DEFAULT_MAX_ROWS_PER_SEGMENT if target is None else _int(target, "targetRowsPerSegment", 1),
        )
    if kind in ("range", "single_dim"):
        if kind == "single_dim":
            dim = spec.get("partitionDimension")
            if not isinstance(dim, str):
                raise SpecError("single_dim partitionsSpec needs 'partitionDimension'")
            keys: tuple[str, ...] = (dim,)
        else:
            keys = tuple(str(d) for d in spec.get("partitionDimensions") or ())
            if not keys:
                raise SpecError("range partitionsSpec needs 'partitionDimensions'")
        target = spec.get("targetRowsPerSegment") or spec.get("maxRowsPerSegment")
        if target is None:
            raise SpecError(f"{kind} partitionsSpec needs 'targetRowsPerSegment' or 'maxRowsPerSegment'")
        return RangePartitions(keys, _int(target, "targetRowsPerSegment", 1), single_dim=kind == "single_dim")
    raise SpecError(f"partitionsSpec type {kind!r} is not supported (dynamic, hashed, range, single_dim)")


def parse_data_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """Druid's `dataSchema` -> the `IngestionSpec` fields it gives (batch and real-time share it)."""
    data_source = schema.get("dataSource")
    if not isinstance(data_source, str) or not data_source.strip():
        raise SpecError("dataSchema.dataSource must be a non-empty string")
    if "/" in data_source or data_source.startswith("."):
        raise SpecError(f"dataSource {data_source!r} may not contain '/' or start with '.'")
    metrics = tuple(parse_metric(m) for m in schema.get("metricsSpec") or ())
    dims = parse_dimensions_spec(_obj(schema.get("dimensionsSpec"), "dimensionsSpec"))
    names = [m.name for m in metrics]
    clash = sorted(set(names) & {d.name for d in dims.dimensions} | {n for n in names if names.count(n) > 1})
    if clash:
        raise SpecError(f"names used more than once among dimensions and metrics: {', '.join(clash)}")
    return {
        "data_source": data_source,
        "timestamp": parse_timestamp_spec(_obj(schema.get("timestampSpec"), "timestampSpec")),
        "dimensions": dims,
        "metrics": metrics,
        "granularity": parse_granularity_spec(_obj(schema.get("granularitySpec"), "granularitySpec")),
        "transform": parse_transform_spec(_obj(schema.get("transformSpec"), "transformSpec")),
    }


def parse_spec(obj: Any) -> IngestionSpec:
    """Druid's ingestion spec JSON (task form or bare spec) -> `IngestionSpec`; raises `SpecError`."""
    obj = _obj(obj, "ingestion spec")
    if "spec" in obj:
        if obj.get("type") not in (None, "index_parallel", "index"):
            raise SpecError(f"task type {obj.get('type')!r} is not supported (index_parallel or index)")
        obj = _obj(obj["spec"], "spec")
    io = _obj(obj.get("ioConfig"), "ioConfig")
    tuning = _obj(obj.get("tuningConfig"), "tuningConfig")
    schema = parse_data_schema(_obj(obj.get("dataSchema"), "dataSchema"))
    if "inputSource" not in io:
        raise SpecError("ioConfig.inputSource is required")
    source = parse_input_source(_obj(io["inputSource"], "inputSource"))
    if isinstance(source, DruidInputSource):  # segments: Druid takes no inputFormat with this source
        fmt = InputFormat("parquet")
    elif "inputFormat" not in io:
        raise SpecError("ioConfig.inputFormat is required")
    else:
        fmt = parse_input_format(_obj(io["inputFormat"], "inputFormat"))
    max_parse = tuning.get("maxParseExceptions")
    if max_parse is None:
        max_parse = DEFAULT_MAX_PARSE_EXCEPTIONS
    elif _int(max_parse, "maxParseExceptions", -1) < 0:  # Druid accepts -1 for unlimited
        max_parse = UNLIMITED
    return IngestionSpec(
        **schema,
        input_source=source,
        input_format=replace(fmt, exact_columns=exact_columns(schema["dimensions"])),
        append=bool(io.get("appendToExisting", False)),
        tuning=TuningConfig(
            partitions=parse_partitions(tuning),
            max_parse_exceptions=int(max_parse),
        ),
    )
