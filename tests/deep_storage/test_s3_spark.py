"""Spark and S3 deep storage: `strata ingest --engine spark` and `df.write.format("strata")` push
straight from the tasks to S3 and publish once; a failed write leaves no object behind."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import strata.spark
from harness.s3_server import S3Server, client_env
from strata.ingestion.api import ingest
from strata.storage import open_deep_storage, open_metadata_store
from strata.storage.segment_cleanup import delete_objects, find_orphans
from tests.spark_ingest.compare import query_raw
from tests.spark_kit import spark  # noqa: F401 - the shared session fixture
from timeline import DataSegment

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def spark_s3(spark: Any, s3_server: S3Server) -> Iterator[Any]:  # noqa: F811
    """The shared session, its Python workers given the S3 credentials (the AWS chain reads the
    environment; workers started from now on get these variables)."""
    env = spark.sparkContext.environment
    saved = dict(env)
    env.update(client_env())
    try:
        yield spark
    finally:
        env.clear()
        env.update(saved)


@pytest.fixture(scope="module")
def wiki(spark_s3: Any, wikipedia_sample: Path) -> Any:
    """The sample as a DataFrame in three partitions, read once for the module."""
    strata.spark.register(spark_s3)
    return spark_s3.read.json(str(wikipedia_sample)).repartition(3).cache()


def _segments_table(s3: S3Server, segments: list[DataSegment]) -> pa.Table:
    fs = s3.filesystem()
    tables = []
    for s in segments:
        with fs.open_input_file(f"{s.load_spec['bucket']}/{s.load_spec['key']}") as f:
            tables.append(pq.read_table(f))
    return pa.concat_tables(tables, promote_options="default")


def _per_channel(table: pa.Table) -> list[tuple[Any, ...]]:
    con = duckdb.connect()
    con.register("segs", table)
    return con.execute("SELECT channel, count(*), sum(added) FROM segs GROUP BY 1 ORDER BY 1").fetchall()


RAW_PER_CHANNEL = "SELECT channel, count(*), sum(added) FROM RAW GROUP BY 1 ORDER BY 1"


def _stored_is_exactly(s3: S3Server, url: str, segments: list[DataSegment]) -> None:
    deep = open_deep_storage(url, s3_endpoint=s3.endpoint)
    assert sorted(o.location for o in deep.stored()) == sorted(deep.location_of(s) for s in segments)


def test_spark_engine_ingests_into_s3(
    spark_s3: Any, s3_server: S3Server, s3_bucket: str, tmp_path: Path, wikipedia_sample: Path,
    wikipedia_index_spec: Path,
) -> None:  # fmt: skip
    import json

    spec = json.loads(wikipedia_index_spec.read_text())
    spec["spec"]["ioConfig"]["inputSource"]["baseDir"] = str(wikipedia_sample.parent)
    spec["spec"]["dataSchema"]["granularitySpec"]["segmentGranularity"] = "hour"
    url = f"s3://{s3_bucket}/spark"
    summary = ingest(spec, deep_storage=url, metadata=tmp_path / "m.db", s3_endpoint=s3_server.endpoint,
                     engine="spark", spark=spark_s3)  # fmt: skip
    with closing(open_metadata_store(tmp_path / "m.db")) as store:
        used = store.used_segments("wikipedia")
    assert len(used) == 24 and {s.load_spec["type"] for s in used} == {"s3"}
    assert _per_channel(_segments_table(s3_server, used)) == query_raw(wikipedia_sample, RAW_PER_CHANNEL)
    assert summary.engine == "spark" and summary.rows_ingested == sum(
        n for _, n, _ in query_raw(wikipedia_sample, RAW_PER_CHANNEL)
    )
    _stored_is_exactly(s3_server, url, used)  # the rows handed between tasks are gone, nothing else left


def _opts(url: str, s3: S3Server, meta: Path) -> dict[str, str]:
    return {"datasource": "wiki", "timestampColumn": "time", "segmentGranularity": "day", "dimensions": "channel",
            "metrics": '[{"type": "longSum", "name": "added", "fieldName": "added"}]',
            "deepStorage": url, "s3Endpoint": s3.endpoint, "metadata": str(meta)}  # fmt: skip


def test_the_spark_writer_pushes_from_tasks_and_publishes_once(
    wiki: Any, s3_server: S3Server, s3_bucket: str, tmp_path: Path, wikipedia_sample: Path
) -> None:
    url = f"s3://{s3_bucket}/writer"
    wiki.write.format("strata").options(**_opts(url, s3_server, tmp_path / "m.db")).mode("overwrite").save()
    with closing(open_metadata_store(tmp_path / "m.db")) as store:
        used = store.used_segments("wiki")
    assert len(used) == 3 and {s.load_spec["type"] for s in used} == {"s3"}  # one per task
    assert [s.partition_num for s in sorted(used, key=lambda s: s.partition_num)] == [0, 1, 2]
    assert _per_channel(_segments_table(s3_server, used)) == query_raw(wikipedia_sample, RAW_PER_CHANNEL)
    _stored_is_exactly(s3_server, url, used)


def test_a_failed_spark_write_leaves_no_object(
    wiki: Any, s3_server: S3Server, s3_bucket: str, tmp_path: Path
) -> None:
    from pyspark.sql import functions as F

    @F.udf(returnType="string", useArrow=False)
    def fail_in_partition_1(channel: str, partition: int) -> str:
        if partition == 1:
            raise ValueError("this task fails on purpose")
        return channel

    broken = wiki.withColumn("channel", fail_in_partition_1("channel", F.spark_partition_id()))
    url = f"s3://{s3_bucket}/failed"
    with pytest.raises(Exception, match="this task fails on purpose"):
        broken.write.format("strata").options(**_opts(url, s3_server, tmp_path / "m.db")).mode(
            "append"
        ).save()
    with closing(open_metadata_store(tmp_path / "m.db")) as store:
        assert store.segments(include_unused=True) == []  # nothing published, nothing half-published
    # `abort()` deleted what the finished tasks pushed. A task still running when its sibling failed
    # can push after that (Spark drops its commit message, the abort never hears of it): such an
    # object is named by no metadata row, and `strata segments cleanup` removes it.
    deep = open_deep_storage(url, s3_endpoint=s3_server.endpoint)
    left = list(deep.stored())
    assert len(left) <= 2, left  # one segment per task; only the two other partitions can be late
    assert delete_objects(deep, find_orphans(deep, [], min_age_s=0).objects) == len(left)
    _stored_is_exactly(s3_server, url, [])
