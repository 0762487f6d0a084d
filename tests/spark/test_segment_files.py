"""A table read given the metadata store reads published segments' files from deep storage.

Against a real cluster (ZooKeeper, two historicals, a broker) serving the wikipedia sample as 24
hourly segments: answers are checked against Spark's own reading of the raw JSON and against the
same read through the data nodes; the historicals' and broker's metrics say which path rows took.
"""

# ruff: noqa: F811 - pytest fixtures imported from another module are parameters here

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from strata.spark import StrataError
from strata.spark.reader import SegmentsPartition, TableReader
from strata.spark.source import StrataDataSource
from tests.cluster.test_broker_cluster import cluster  # noqa: F401 - the module's cluster fixture
from tests.spark.test_spark_read import (
    SEGMENTS,
    metric,
    millis,
    node_metrics,
    node_metrics_since,
    per_channel,
    raw_df,  # noqa: F401 - the raw JSON as Spark reads it: the oracle
    strata,
    url,
)

pytestmark = pytest.mark.integration


def metadata(cluster: dict[str, Any]) -> str:
    return str(cluster["root"] / "meta.db")


def test_a_full_read_takes_every_segment_from_its_file(
    spark: SparkSession, cluster: dict[str, Any], raw_df: DataFrame
) -> None:
    df = strata(spark, cluster, datasource="wikipedia", metadata=metadata(cluster))
    nodes_before = node_metrics(cluster)
    broker_before = metric(cluster, "strata_broker_streamed_segments")
    assert per_channel(df) == per_channel(raw_df)
    assert millis(df) == millis(raw_df)
    assert node_metrics_since(cluster, nodes_before) == (0, 0)  # no historical scanned a segment
    assert metric(cluster, "strata_broker_streamed_segments") == broker_before


def test_files_and_data_nodes_give_the_same_rows(spark: SparkSession, cluster: dict[str, Any]) -> None:
    files = strata(spark, cluster, datasource="wikipedia", metadata=metadata(cluster))
    nodes = strata(spark, cluster, datasource="wikipedia", metadata=metadata(cluster), segmentFiles="false")
    assert files.schema == nodes.schema
    before = node_metrics(cluster)
    assert nodes.count() == files.count() > 0
    assert node_metrics_since(cluster, before)[1] == SEGMENTS  # `segmentFiles` false: the nodes answered
    assert files.exceptAll(nodes).count() == 0 and nodes.exceptAll(files).count() == 0  # row for row


def test_small_batches_give_the_same_rows(
    spark: SparkSession, cluster: dict[str, Any], raw_df: DataFrame
) -> None:
    small = strata(spark, cluster, datasource="wikipedia", metadata=metadata(cluster), batchRows=100)
    nodes = strata(spark, cluster, datasource="wikipedia", batchRows=100)  # the data nodes' answers, sliced
    for df in (small, nodes):
        assert per_channel(df) == per_channel(raw_df)
        assert millis(df) == millis(raw_df)


def test_filtered_and_partial_segments_go_to_the_data_nodes(
    spark: SparkSession, cluster: dict[str, Any], raw_df: DataFrame
) -> None:
    def window(df: DataFrame) -> DataFrame:  # hour 05 in part, hours 06 and 07 whole
        return df.where(
            (F.col("__time") >= F.lit("2015-09-12 05:30:00").cast("timestamp"))
            & (F.col("__time") < F.lit("2015-09-12 08:00:00").cast("timestamp"))
        )

    read = strata(spark, cluster, datasource="wikipedia", metadata=metadata(cluster))
    before = node_metrics(cluster)
    assert millis(window(read)) == millis(window(raw_df))
    assert node_metrics_since(cluster, before)[1] == 1  # the part of hour 05; 06 and 07 from files

    def english(df: DataFrame) -> DataFrame:
        return df.where(F.col("channel") == "#en.wikipedia")

    before = node_metrics(cluster)
    assert per_channel(english(read)) == per_channel(english(raw_df))
    assert node_metrics_since(cluster, before)[1] == SEGMENTS  # a pushed filter: the nodes run it


def test_a_file_the_task_cannot_open_is_asked_of_its_data_node(
    cluster: dict[str, Any], tmp_path: Path
) -> None:
    source = StrataDataSource({"broker": url(cluster), "datasource": "wikipedia", "partitions": "1",
                               "columns": "__time,channel,added", "metadata": metadata(cluster)})  # fmt: skip
    reader = source.reader(source.schema())
    assert isinstance(reader, TableReader)
    (part,) = reader.partitions()
    assert isinstance(part, SegmentsPartition) and all(part.files)
    whole = pa.Table.from_batches(list(reader.read(part))).sort_by("__time")
    missing = str(tmp_path / "gone" / "index.parquet")
    files = [missing if i % 3 == 0 else f for i, f in enumerate(part.files)]
    before = node_metrics(cluster)
    mixed = pa.Table.from_batches(
        list(reader.read(SegmentsPartition(part.segments, part.servers, part.sizes, files)))
    )
    assert node_metrics_since(cluster, before)[1] == len(range(0, SEGMENTS, 3))
    assert mixed.sort_by("__time").equals(whole)


def test_options(cluster: dict[str, Any], tmp_path: Path) -> None:
    def plan(**options: str) -> list[SegmentsPartition]:
        source = StrataDataSource({"broker": url(cluster), "datasource": "wikipedia", **options})
        return [p for p in source.reader(source.schema()).partitions() if isinstance(p, SegmentsPartition)]

    assert not any(f for p in plan() for f in p.files)  # without the metadata store: no files
    assert not any(f for p in plan(metadata=metadata(cluster), segmentFiles="false") for f in p.files)
    assert all(all(p.files) for p in plan(metadata=metadata(cluster)))
    with pytest.raises(StrataError, match="no metadata store at"):
        plan(metadata=str(tmp_path / "nope.db"))
    with pytest.raises(StrataError, match="segmentFiles must be true or false"):
        plan(metadata=metadata(cluster), segmentFiles="yes")
    with pytest.raises(StrataError, match="batchRows must be a positive integer"):
        plan(batchRows="0")
