"""`df.write.format("strata")` on real Spark: append, overwrite, rollup, failures that publish nothing."""

from __future__ import annotations

from contextlib import closing
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import strata.spark
from strata.storage import open_metadata_store
from tests.spark_ingest.compare import files_under, query_raw

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def wiki(spark: Any, wikipedia_sample: Path) -> Any:
    strata.spark.register(spark)
    return spark.read.json(str(wikipedia_sample)).repartition(3).cache()


def _opts(tmp_path: Path, **extra: Any) -> dict[str, str]:
    base = {"datasource": "wiki", "timestampColumn": "time", "segmentGranularity": "day",
            "deepStorage": str(tmp_path / "deep"), "metadata": str(tmp_path / "m.db")}  # fmt: skip
    return {**base, **{k: str(v) for k, v in extra.items()}}


def _used(tmp_path: Path, ds: str = "wiki") -> list[Any]:
    with closing(open_metadata_store(tmp_path / "m.db")) as store:
        return sorted(store.used_segments(ds), key=lambda s: (s.interval, s.partition_num))


def _all(tmp_path: Path) -> list[Any]:
    with closing(open_metadata_store(tmp_path / "m.db")) as store:
        return store.segments(include_unused=True)


def _count_per_channel(segments: list[Any]) -> list[tuple[Any, ...]]:
    paths = [s.load_spec["path"] for s in segments]
    return duckdb.execute(
        f"SELECT channel, count(*) FROM read_parquet({paths!r}) GROUP BY 1 ORDER BY 1"
    ).fetchall()


def test_append_twice_then_overwrite(wiki, tmp_path, wikipedia_sample):
    opts = _opts(tmp_path, maxRowsPerSegment=5000, dimensions="channel,page,user")
    raw = query_raw(wikipedia_sample, "SELECT channel, count(*) FROM RAW GROUP BY 1 ORDER BY 1")

    wiki.write.format("strata").options(**opts).mode("append").save()
    first = _used(tmp_path)
    assert {str(s.interval) for s in first} == {"2015-09-12T00:00:00.000Z/2015-09-13T00:00:00.000Z"}
    assert len({s.version for s in first}) == 1
    k = len(first)  # three tasks of ~13,081 rows, each cut at 5,000: 9 partitions
    assert k == 9
    assert [s.shard_spec.to_json() for s in first] == [
        {"type": "numbered", "partitionNum": i, "partitions": k} for i in range(k)
    ]
    assert _count_per_channel(first) == raw

    wiki.write.format("strata").options(**opts).mode("append").save()
    second = _used(tmp_path)
    assert {s.version for s in second} == {first[0].version}  # appended to the same version
    assert [s.partition_num for s in second] == list(range(2 * k))
    assert all(s.shard_spec.partitions == k for s in second)  # the core set is unchanged
    assert _count_per_channel(second) == [(c, 2 * n) for c, n in raw]

    wiki.write.format("strata").options(**opts).mode("overwrite").save()
    third = _used(tmp_path)
    assert len({s.version for s in third}) == 1 and third[0].version > first[0].version
    assert _count_per_channel(third) == raw
    records = _all(tmp_path)
    assert sum(not r.used for r in records) == 2 * k  # overshadowed, kept as unused
    assert all(r.used == (r.segment.version == third[0].version) for r in records)
    assert not list((tmp_path / "deep" / ".staging").iterdir())


def test_rollup_with_a_metrics_spec(wiki, tmp_path, wikipedia_sample):
    metrics = ('[{"type": "count", "name": "edits"}, {"type": "longSum", "name": "added", "fieldName": "added"},'
               ' {"type": "doubleMax", "name": "max_delta", "fieldName": "delta"}]')  # fmt: skip
    opts = _opts(tmp_path, queryGranularity="hour", rollup="true", dimensions="channel", metrics=metrics)
    # rows of one channel in one task: the rollup is perfect (otherwise best-effort, per task)
    wiki.repartition(2, "channel").write.format("strata").options(**opts).mode("overwrite").save()
    segs = _used(tmp_path)
    assert [s.shard_spec.to_json() for s in segs] == [
        {"type": "numbered", "partitionNum": i, "partitions": 2} for i in range(2)
    ]  # one per task
    paths = [s.load_spec["path"] for s in segs]
    got = duckdb.execute(
        f"SELECT __time, channel, edits, added, max_delta FROM read_parquet({paths!r}) ORDER BY 1, 2"
    ).fetchall()
    want = query_raw(
        wikipedia_sample,
        "SELECT date_trunc('hour', CAST(time AS TIMESTAMPTZ)), channel, count(*), sum(added), max(delta)::DOUBLE"
        " FROM RAW GROUP BY 1, 2 ORDER BY 1, 2",
    )
    assert [(t.replace(tzinfo=None), *r) for t, *r in got] == [(t.replace(tzinfo=None), *r) for t, *r in want]
    assert segs[0].metrics == ("edits", "added", "max_delta") and segs[0].dimensions == ("channel",)


def test_a_failing_task_publishes_nothing_and_leaves_no_files(wiki, tmp_path, spark):
    from pyspark.sql import functions as F

    opts = _opts(tmp_path, dimensions="channel")
    wiki.write.format("strata").options(**opts).mode("append").save()
    before_files, before = files_under(tmp_path / "deep"), _all(tmp_path)

    @F.udf(returnType="string", useArrow=False)
    def fail_in_partition_1(channel, partition):
        if partition == 1:
            raise ValueError("this task fails on purpose")
        return channel

    broken = wiki.withColumn("channel", fail_in_partition_1("channel", F.spark_partition_id()))
    for mode in ("append", "overwrite"):
        with pytest.raises(Exception, match="this task fails on purpose"):
            broken.write.format("strata").options(**opts).mode(mode).save()
        assert _all(tmp_path) == before
        assert files_under(tmp_path / "deep") == before_files


def test_bad_rows_fail_the_write_unless_allowed(spark, tmp_path):
    strata.spark.register(spark)
    df = spark.createDataFrame(
        [("2020-01-01T00:00:00Z", "a"), ("not a time", "b"), ("2020-01-01T05:00:00Z", "c")],
        "ts string, d string",
    ).coalesce(1)
    opts = _opts(tmp_path, timestampColumn="ts")
    with pytest.raises(Exception, match="maxParseExceptions=0"):
        df.write.format("strata").options(**opts).mode("append").save()
    assert _all(tmp_path) == [] and files_under(tmp_path / "deep") == []
    df.write.format("strata").options(**opts, maxParseExceptions="1").mode("append").save()
    (seg,) = _used(tmp_path)
    assert duckdb.execute(f"SELECT d FROM '{seg.load_spec['path']}' ORDER BY 1").fetchall() == [
        ("a",),
        ("c",),
    ]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"datasource": ""}, "option 'datasource' is required"),
        ({"timestampColumn": "nope"}, "timestampColumn 'nope' is not a column"),
        ({"metrics": "[{"}, "option 'metrics' is not valid JSON"),
        ({"segmentGranularity": "fortnight"}, "segmentGranularity"),
    ],
)
def test_bad_options_are_clear_errors(wiki, tmp_path, change, message):
    with pytest.raises(Exception, match=message):
        wiki.write.format("strata").options(**{**_opts(tmp_path), **change}).mode("append").save()
    assert files_under(tmp_path / "deep") == []


def test_timestamp_column_and_typed_dimensions_from_the_schema(spark, tmp_path):
    """A Spark timestamp keeps its millisecond; numeric columns become long/double dimensions."""
    from datetime import UTC, datetime

    strata.spark.register(spark)
    rows = [
        (datetime(2024, 3, 1, 10, 0, 0, 123000, tzinfo=UTC), "a", 5, 1.5),
        (datetime(2024, 3, 1, 11, 30, 0, 7000, tzinfo=UTC), None, -2, None),
        (datetime(2024, 3, 2, 0, 0, 0, 999000, tzinfo=UTC), "b", None, 2.25),
    ]
    df = spark.createDataFrame(rows, "ts timestamp, d string, n int, x double").coalesce(1)
    df.write.format("strata").options(**_opts(tmp_path, datasource="typed", timestampColumn="ts")).mode(
        "overwrite"
    ).save()
    segs = _used(tmp_path, "typed")
    assert [str(s.interval)[:10] for s in segs] == ["2024-03-01", "2024-03-02"]
    assert segs[0].dimensions == ("d", "n", "x")
    paths = [s.load_spec["path"] for s in segs]
    table = pa.concat_tables([pq.read_table(p) for p in paths]).sort_by("__time")
    assert [str(t) for t in table.schema.types] == ["timestamp[ms, tz=UTC]", "string", "int64", "double"]
    assert [r["__time"].isoformat() for r in table.to_pylist()] == [
        "2024-03-01T10:00:00.123000+00:00",
        "2024-03-01T11:30:00.007000+00:00",
        "2024-03-02T00:00:00.999000+00:00",
    ]
    assert table.column("n").to_pylist() == [5, -2, None] and table.column("x").to_pylist() == [
        1.5,
        None,
        2.25,
    ]
    # an empty `dimensions` is schemaless, as `strata ingest`: every other column a string dimension
    opts = _opts(tmp_path, datasource="schemaless", timestampColumn="ts", dimensions="")
    df.write.format("strata").options(**opts).mode("overwrite").save()
    segs = _used(tmp_path, "schemaless")
    table = pa.concat_tables([pq.read_table(s.load_spec["path"]) for s in segs]).sort_by("__time")
    assert segs[0].dimensions == ("d", "n", "x") and set(map(str, table.schema.types[1:])) == {"string"}
    assert table.column("n").to_pylist() == ["5", "-2", None]
