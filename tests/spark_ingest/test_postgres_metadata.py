"""Both Spark paths publish to a PostgreSQL metadata store: `df.write.format("strata")` with the
`metadata` option, and `strata ingest --engine spark` (the driver publishes; executors never touch
the store). Checked against DuckDB over the raw rows."""

from __future__ import annotations

from contextlib import closing
from pathlib import Path
from typing import Any

import duckdb
import pytest

import strata.spark
from strata.ingestion.api import ingest
from strata.storage import open_metadata_store
from tests.spark_ingest.compare import query_raw

pytestmark = pytest.mark.timeout(240)


def _rows_per_channel(segments: list[Any]) -> list[tuple[Any, ...]]:
    paths = [s.load_spec["path"] for s in segments]
    return duckdb.execute(
        f"SELECT channel, count(*) FROM read_parquet({paths!r}) GROUP BY 1 ORDER BY 1"
    ).fetchall()


def test_spark_writer_and_spark_engine_publish_to_postgres(
    spark, postgres_server, postgres_url, tmp_path: Path, wikipedia_sample
):
    raw = query_raw(wikipedia_sample, "SELECT channel, count(*) FROM RAW GROUP BY 1 ORDER BY 1")
    strata.spark.register(spark)
    df = spark.read.json(str(wikipedia_sample)).repartition(2)
    opts = {"datasource": "wiki", "timestampColumn": "time", "segmentGranularity": "day",
            "deepStorage": str(tmp_path / "deep"), "dimensions": "channel,page",
            # Spark's Python workers started before this test's PGPASSFILE: the password rides in
            # the option, as a job without ~/.pgpass on its hosts would pass it
            "metadata": postgres_url.replace("strata@", f"strata:{postgres_server.password}@")}  # fmt: skip
    df.write.format("strata").options(**opts).mode("overwrite").save()
    with closing(open_metadata_store(postgres_url)) as store:
        written = store.used_segments("wiki")
    assert written and _rows_per_channel(written) == raw

    spec = {"type": "index_parallel", "spec": {
        "dataSchema": {"dataSource": "wiki2", "timestampSpec": {"column": "time", "format": "iso"},
                       "dimensionsSpec": {"dimensions": ["channel", "page"]},
                       "granularitySpec": {"segmentGranularity": "day", "queryGranularity": "none", "rollup": False}},
        "ioConfig": {"type": "index_parallel", "inputSource": {"type": "local", "baseDir": str(wikipedia_sample.parent),
                                                                "filter": wikipedia_sample.name},
                     "inputFormat": {"type": "json"}}}}  # fmt: skip
    summary = ingest(spec, deep_storage=tmp_path / "deep", metadata=postgres_url, engine="spark", spark=spark)
    assert summary.engine == "spark"
    with closing(open_metadata_store(postgres_url)) as store:
        assert store.data_sources() == ["wiki", "wiki2"]
        assert _rows_per_channel(store.used_segments("wiki2")) == raw
