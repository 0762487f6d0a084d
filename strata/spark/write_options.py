"""`df.write.format("strata")` options -> the same `IngestionSpec` `strata ingest` runs.

| option | default | meaning |
|---|---|---|
| `datasource` | (required) | data source to write |
| `timestampColumn`, `timestampFormat` | `timestamp`, `auto` | the row time (a timestamp, epoch ms, or text) |
| `segmentGranularity`, `queryGranularity` | `day`, `none` | time chunks, `__time` truncation |
| `rollup` | `false` | combine equal rows (adds a `count` metric when `metrics` is not given) |
| `dimensions` | other columns (typed: see below) | JSON list of names / `{"name","type"}`, or names "a,b" |
| `metrics` | `[]` | JSON metricsSpec, e.g. `[{"type":"longSum","name":"added","fieldName":"added"}]` |
| `maxRowsPerSegment` | 5,000,000 | dynamic partitioning within each Spark task |
| `maxParseExceptions` | 0 | unparseable rows allowed (-1: unlimited) |
| `deepStorage`, `metadata` | `var/deep-storage`, `var/metadata.db` | where to publish (as `strata ingest`) |
| `s3Endpoint`, `s3Region` | AWS | an S3-compatible store for `deepStorage` `s3://BUCKET/PREFIX` |

Without `dimensions`, each other column is a dimension typed from the DataFrame: strings, booleans,
dates and timestamps `string`; integers `long`; floats `float`; doubles and decimals `double`; an
array of strings a multi-value `string` (as Druid's Spark connectors write them); an array of
numbers or booleans an `auto` column (ARRAY<LONG> / ARRAY<DOUBLE>); a struct, a map or an array of
them a `json` column (COMPLEX<json>). Name a column `{"name": "tags", "type": "auto"}` in
`dimensions` to store an array of strings as ARRAY<STRING> instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson
from pyspark.sql import types as T

from strata.ingestion.errors import SpecError
from strata.ingestion.spec import IngestionSpec, parse_spec

_TYPES: dict[type[T.DataType], str] = {
    T.ByteType: "long", T.ShortType: "long", T.IntegerType: "long", T.LongType: "long",
    T.FloatType: "float", T.DoubleType: "double", T.DecimalType: "double",
}  # fmt: skip
_FLAT = (T.StringType, T.BooleanType, T.DateType, T.TimestampType, T.TimestampNTZType, *_TYPES)


def option(options: Mapping[str, str], name: str, default: str | None = None) -> str | None:
    """An option by name, whatever its case (Spark lower-cases option names)."""
    lowered = {k.lower(): v for k, v in options.items()}
    return lowered.get(name.lower(), default)


def _json(text: str, name: str) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as e:
        raise SpecError(f"option {name!r} is not valid JSON: {e}") from None


def _bool(text: str | None, name: str) -> bool:
    if text is None:
        return False
    if text.strip().lower() in ("true", "1", "yes"):
        return True
    if text.strip().lower() in ("false", "0", "no"):
        return False
    raise SpecError(f"option {name!r} must be true or false, got {text!r}")


def dimension_type(kind: T.DataType) -> str:
    """The dimension type a column of Spark type `kind` becomes (see the module's docstring)."""
    if isinstance(kind, T.ArrayType):
        element = kind.elementType
        if isinstance(element, (T.StringType, T.DateType, T.TimestampType, T.TimestampNTZType)):
            return "string"
        return "auto" if isinstance(element, _FLAT) else "json"
    if isinstance(kind, (T.StructType, T.MapType)):
        return "json"
    return _TYPES.get(type(kind), "string")


def _dimensions(text: str | None, schema: T.StructType, exclude: set[str]) -> list[Any]:
    """Named dimensions, or every other column typed from the DataFrame's schema."""
    if text is not None:
        if text.strip().startswith("["):
            dims = _json(text, "dimensions")
            if not isinstance(dims, list):
                raise SpecError("option 'dimensions' must be a JSON list or comma-separated names")
            return dims
        return [d.strip() for d in text.split(",") if d.strip()]
    return [
        {"name": f.name, "type": dimension_type(f.dataType)}
        for f in schema.fields
        if f.name not in exclude and isinstance(f.dataType, (*_FLAT, T.ArrayType, T.StructType, T.MapType))
    ]


def spec_from_options(options: Mapping[str, str], schema: T.StructType, *, append: bool) -> IngestionSpec:
    """The ingestion spec these options describe; the input itself is the DataFrame."""
    data_source = option(options, "datasource")
    if not data_source:
        raise SpecError("option 'datasource' is required: .option('datasource', 'events')")
    ts = option(options, "timestampColumn", "timestamp")
    assert ts is not None
    if ts not in schema.fieldNames():
        raise SpecError(
            f"timestampColumn {ts!r} is not a column of the DataFrame ({', '.join(schema.fieldNames())})"
        )
    rollup = _bool(option(options, "rollup"), "rollup")
    metrics_text = option(options, "metrics")
    metrics = _json(metrics_text, "metrics") if metrics_text else []
    if not isinstance(metrics, list):
        raise SpecError("option 'metrics' must be a JSON list (a Druid metricsSpec)")
    if rollup and not metrics:
        metrics = [{"type": "count", "name": "count"}]
    named = [m.get(k) for m in metrics if isinstance(m, dict) for k in ("fieldName", "name")]
    exclude = {ts} | {str(n) for n in named if n}
    tuning: dict[str, Any] = {}
    max_rows = option(options, "maxRowsPerSegment")
    if max_rows is not None:
        tuning["partitionsSpec"] = {
            "type": "dynamic",
            "maxRowsPerSegment": _int(max_rows, "maxRowsPerSegment"),
        }
    max_parse = option(options, "maxParseExceptions")
    if max_parse is not None:
        tuning["maxParseExceptions"] = _int(max_parse, "maxParseExceptions")
    return parse_spec({
        "dataSchema": {
            "dataSource": data_source,
            "timestampSpec": {"column": ts, "format": option(options, "timestampFormat", "auto")},
            "dimensionsSpec": {"dimensions": _dimensions(option(options, "dimensions"), schema, exclude)},
            "metricsSpec": metrics,
            "granularitySpec": {
                "segmentGranularity": option(options, "segmentGranularity", "day"),
                "queryGranularity": option(options, "queryGranularity", "none"),
                "rollup": rollup,
            },
        },
        "ioConfig": {
            "inputSource": {"type": "inline", "data": ""},  # the DataFrame is the input
            "inputFormat": {"type": "json"},
            "appendToExisting": append,
        },
        "tuningConfig": tuning,
    })  # fmt: skip


def _int(text: str, name: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise SpecError(f"option {name!r} must be an integer, got {text!r}") from None
