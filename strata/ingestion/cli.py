"""`strata ingest`: run a batch ingestion from a Druid spec file or from flags for the common case."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from strata.server.engine_flags import size
from strata.storage.deep_storage_flags import add_deep_storage_flags

HELP = "Ingest a batch of data (Druid native batch spec or flags) into segments"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("spec", nargs="?", help="Druid ingestion spec JSON (index_parallel / index)")
    add_deep_storage_flags(parser)
    parser.add_argument(
        "--metadata", default="var/metadata.db", help="SQLite file or postgresql://USER@HOST:PORT/DB"
    )
    parser.add_argument(
        "--engine",
        default="auto",
        choices=["auto", "local", "spark"],
        help="ingestion engine; auto: Spark from --spark-threshold bytes of input up, else local",
    )
    spark = parser.add_argument_group("Spark (--engine spark or auto)")
    spark.add_argument("--spark-master", help="Spark master URL (default local[*])")
    spark.add_argument(
        "--spark-conf", action="append", default=[], metavar="KEY=VALUE", help="Spark setting (repeatable)"
    )
    spark.add_argument(
        "--spark-threshold", type=size, default=None, metavar="SIZE",
        help="input size from which auto picks Spark, e.g. 512MiB (default 2GiB)",
    )  # fmt: skip
    flags = parser.add_argument_group("without a spec file")
    flags.add_argument("--datasource", help="data source name")
    flags.add_argument("--input", action="append", help="input file or directory (repeatable)")
    flags.add_argument(
        "--format", choices=["json", "csv", "tsv", "parquet"], help="input format (from suffix)"
    )
    flags.add_argument("--timestamp-column", default="timestamp", help="timestamp column")
    flags.add_argument("--timestamp-format", default="auto", help="iso, millis, posix, micro, nano or auto")
    flags.add_argument("--segment-granularity", default="day", help="e.g. hour, day, month")
    flags.add_argument("--query-granularity", default="none", help="e.g. none, minute, hour")
    flags.add_argument("--dimensions", help="comma-separated dimensions (default: discover all)")
    flags.add_argument("--rollup", action="store_true", help="combine equal rows, adding a 'count' metric")
    flags.add_argument("--interval", action="append", help="only ingest rows in this ISO interval")
    flags.add_argument("--max-rows-per-segment", type=int, help="dynamic partitioning limit")
    flags.add_argument("--max-parse-exceptions", type=int, help="unparseable rows allowed (default 0)")
    flags.add_argument("--append", action="store_true", help="add partitions instead of overwriting")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")


def spark_conf(items: list[str] | str) -> dict[str, str]:
    """`--spark-conf k=v` flags (or one comma-separated string from the environment or a config file)."""
    if isinstance(items, str):
        items = [i for i in items.split(",") if i.strip()]
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--spark-conf wants KEY=VALUE, got {item!r}")
        out[key.strip()] = value.strip()
    return out


def spec_from_flags(args: argparse.Namespace) -> dict[str, Any]:
    """A Druid spec dict built from the flags (so both routes share one parser)."""
    from pathlib import Path

    from strata.ingestion.readers import matching_files

    if not args.datasource or not args.input:
        raise ValueError("give a spec file, or --datasource and --input")
    files: list[str] = []
    for item in args.input:
        p = Path(item)
        files += [str(f) for f in matching_files(p, "*")] if p.is_dir() else [item]
    fmt = args.format
    if fmt is None:
        suffixes = [s for s in Path(files[0]).suffixes if s not in (".gz", ".bz2", ".xz")] if files else []
        fmt = {".json": "json", ".jsonl": "json", ".csv": "csv", ".tsv": "tsv", ".parquet": "parquet"}.get(
            suffixes[-1] if suffixes else "", "json"
        )
    input_format: dict[str, Any] = {"type": fmt}
    if fmt in ("csv", "tsv"):
        input_format["findColumnsFromHeader"] = True
    dims = [d.strip() for d in args.dimensions.split(",") if d.strip()] if args.dimensions else []
    tuning: dict[str, Any] = {"type": "index_parallel"}
    if args.max_rows_per_segment:
        tuning["partitionsSpec"] = {"type": "dynamic", "maxRowsPerSegment": args.max_rows_per_segment}
    if args.max_parse_exceptions is not None:
        tuning["maxParseExceptions"] = args.max_parse_exceptions
    granularity: dict[str, Any] = {
        "segmentGranularity": args.segment_granularity,
        "queryGranularity": args.query_granularity,
        "rollup": bool(args.rollup),
    }
    if args.interval:
        granularity["intervals"] = args.interval
    return {
        "type": "index_parallel",
        "spec": {
            "dataSchema": {
                "dataSource": args.datasource,
                "timestampSpec": {"column": args.timestamp_column, "format": args.timestamp_format},
                "dimensionsSpec": {"dimensions": dims},
                "metricsSpec": [{"type": "count", "name": "count"}] if args.rollup else [],
                "granularitySpec": granularity,
            },
            "ioConfig": {
                "type": "index_parallel",
                "inputSource": {"type": "local", "files": files},
                "inputFormat": input_format,
                "appendToExisting": bool(args.append),
            },
            "tuningConfig": tuning,
        },
    }


def run(args: argparse.Namespace) -> int:
    from strata.ingestion.errors import IngestionError
    from strata.ingestion.report import RichProgress, print_summary
    from strata.storage.deep_storage import DeepStorageError
    from strata.storage.metadata_store import MetadataStoreError

    try:
        from strata.ingestion.api import AUTO_SPARK_BYTES, choose_engine, ingest, load_spec

        spec: Any = load_spec(args.spec if args.spec else spec_from_flags(args))
        conf = spark_conf(args.spark_conf)
        engine, why = args.engine, ""
        if engine == "auto":
            engine, why = choose_engine(spec, args.spark_threshold or AUTO_SPARK_BYTES)
            print(f"strata ingest: engine {engine} ({why})", file=sys.stderr)
        progress = RichProgress() if sys.stderr.isatty() and not args.json else None
        try:
            summary = ingest(
                spec,
                deep_storage=args.deep_storage,
                s3_endpoint=args.s3_endpoint,
                s3_region=args.s3_region,
                metadata=args.metadata,
                engine=engine,
                progress=progress,
                spark_master=args.spark_master,
                spark_conf=conf,
            )
            summary.engine_reason = why
        finally:
            if progress is not None:
                progress.stop()
    except (IngestionError, MetadataStoreError, DeepStorageError, ValueError, OSError) as e:
        print(f"strata ingest: error: {e}", file=sys.stderr)
        return 1
    print_summary(summary, as_json=args.json)
    return 0
