"""`ingest()`: the one call programs (and the CLI) use to run a batch ingestion."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from strata.ingestion.errors import SpecError
from strata.ingestion.fetch import S3Settings
from strata.ingestion.spec import IngestionSpec, parse_spec
from strata.ingestion.summary import IngestionSummary, Progress, human_size
from strata.storage import (
    DEFAULT_DEEP_STORAGE,
    DEFAULT_METADATA,
    DeepStorage,
    MetadataStore,
    open_deep_storage,
    open_metadata_store,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ENGINES = ("auto", "local", "spark")
AUTO_SPARK_BYTES = 2 << 30
"""`engine="auto"` uses Spark when the input files hold at least this many bytes (as stored, so
compressed files count compressed), the local engine below: a Spark session costs several seconds
to start, and the local engine builds ~10M rows in well under a minute on one machine."""


def choose_engine(
    spec: IngestionSpec, threshold: int = AUTO_SPARK_BYTES, metadata: MetadataStore | None = None
) -> tuple[str, str]:
    """(engine, why) for `engine="auto"`: by the size of the spec's input (a `druid` source's
    segments as the metadata store records them; remote files are not fetched to be measured)."""
    from strata.ingestion.input_sources import DruidInputSource, HttpInputSource, S3InputSource
    from strata.ingestion.readers import resolve_inputs

    source = spec.input_source
    if isinstance(source, (HttpInputSource, S3InputSource)):
        return "local", "the size of remote input is not known before it is fetched: the local engine"
    if isinstance(source, DruidInputSource):
        used = metadata.used_segments(source.data_source) if metadata is not None else []
        size = sum(s.size for s in used if s.interval.overlaps(source.interval))
    else:
        size = sum(f.size for f in resolve_inputs(source))
    if size >= threshold:
        return "spark", f"{human_size(size)} of input is at least the {human_size(threshold)} threshold"
    return "local", f"{human_size(size)} of input is below the {human_size(threshold)} threshold for Spark"


def load_spec(spec: IngestionSpec | Mapping[str, Any] | str | Path) -> IngestionSpec:
    """A parsed spec from an `IngestionSpec`, a spec dict, or the path of a spec JSON file."""
    if isinstance(spec, IngestionSpec):
        return spec
    if isinstance(spec, (str, Path)):
        return parse_spec(read_spec_file(spec))
    return parse_spec(spec)


def read_spec_file(path: str | Path, what: str = "ingestion spec") -> Any:
    """The JSON of a spec file; `SpecError` when it cannot be read or parsed."""
    try:
        return orjson.loads(Path(path).read_bytes())
    except OSError as e:
        raise SpecError(f"cannot read {what} {path}: {e.strerror}") from None
    except orjson.JSONDecodeError as e:
        raise SpecError(f"{what} {path} is not valid JSON: {e}") from None


def ingest(
    spec: IngestionSpec | Mapping[str, Any] | str | Path,
    *,
    deep_storage: str | Path | DeepStorage = DEFAULT_DEEP_STORAGE,
    metadata: str | Path | MetadataStore = DEFAULT_METADATA,
    engine: str = "auto",
    progress: Progress | None = None,
    spark: SparkSession | None = None,
    spark_master: str | None = None,
    spark_conf: Mapping[str, str] | None = None,
    auto_threshold: int = AUTO_SPARK_BYTES,
    s3_endpoint: str | None = None,
    s3_region: str | None = None,
) -> IngestionSummary:
    """Run one batch ingestion and publish its segments; raises `IngestionError` (nothing published).

    `engine`: local, spark, or auto (spark from `auto_threshold` input bytes up; the summary says
    which ran and why). With spark, `spark` is a session to use (left running), else one is started
    on `spark_master` (default local[*]) with `spark_conf` and stopped afterwards.
    `deep_storage`: a directory, `file://DIR` or `s3://BUCKET/PREFIX` (with `s3_endpoint` and
    `s3_region` for S3-compatible stores), or an opened `DeepStorage`.
    """
    parsed = load_spec(spec)
    if engine not in ENGINES:
        raise SpecError(f"unknown engine {engine!r} ({', '.join(ENGINES)})")
    deep = (
        open_deep_storage(deep_storage, s3_endpoint=s3_endpoint, s3_region=s3_region)
        if isinstance(deep_storage, (str, Path))
        else deep_storage
    )
    store = open_metadata_store(metadata) if isinstance(metadata, (str, Path)) else metadata
    s3 = S3Settings(s3_endpoint, s3_region)
    reason = ""
    try:
        if engine == "auto":
            engine, reason = choose_engine(parsed, auto_threshold, store)
        if engine == "spark":
            from strata.ingestion.spark_engine import run_spark

            summary = run_spark(
                parsed, deep, store, progress, spark=spark, master=spark_master, conf=spark_conf, s3=s3
            )
        else:
            from strata.ingestion.local_engine import run_local

            summary = run_local(parsed, deep, store, progress, s3=s3)
    finally:
        if store is not metadata:
            store.close()
    summary.engine_reason = reason
    return summary
