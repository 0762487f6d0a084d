"""Arrays, multi-value strings and nested values through Spark: `df.write.format("strata")` stores
what Druid's rules make of the DataFrame's rows, and `spark.read.format("strata")` reads them back
from a real historical and broker as Spark arrays and JSON text. Expected values come from the
rows the test wrote (`tests.ingestion.data_model_oracle`), never from the engine."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from pyspark.sql import types as T

import strata.spark
from harness.processes import StrataProcess
from strata.storage import open_metadata_store
from strata.storage.segment_file import read_segment_facts
from tests.ingestion.data_model_oracle import mv_row
from tests.sql_corpus.cluster import serving

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

SCHEMA = T.StructType([
    T.StructField("time", T.TimestampType()),
    T.StructField("k", T.LongType()),
    T.StructField("tags", T.ArrayType(T.StringType())),
    T.StructField("nums", T.ArrayType(T.LongType())),
    T.StructField("scores", T.ArrayType(T.DoubleType())),
    T.StructField("meta", T.StructType([T.StructField("user", T.StringType()), T.StructField("n", T.LongType())])),
    T.StructField("attrs", T.MapType(T.StringType(), T.LongType())),
])  # fmt: skip
START = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)


def _rows() -> list[tuple[Any, ...]]:
    out = []
    for i in range(40):
        tags = [None, [], [f"t{i % 3}"], [f"t{i % 5}", "a", "a"], ["z", f"t{i % 2}"]][i % 5]
        nums = None if i % 7 == 0 else [i, None, i * 2][: 1 + i % 3]
        scores = [] if i % 4 == 0 else [i / 4]
        meta = None if i % 6 == 0 else {"user": f"u{i % 3}", "n": i}
        attrs = {f"k{i % 2}": i} if i % 3 else None
        out.append((START + dt.timedelta(hours=i % 48), i, tags, nums, scores, meta, attrs))
    return out


@pytest.fixture(scope="module")
def written(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    strata.spark.register(spark)
    root = tmp_path_factory.mktemp("spark-data-model")
    df = spark.createDataFrame(_rows(), SCHEMA).repartition(2)
    (df.write.format("strata").option("datasource", "dm").option("timestampColumn", "time")
       .option("deepStorage", str(root / "deep")).option("metadata", str(root / "meta.db"))
       .mode("overwrite").save())  # fmt: skip
    return root


def _stored(root: Path) -> tuple[dict[int, dict[str, Any]], list[dict[str, Any]]]:
    """Every stored row by `k`, and the dimension entries of each segment."""
    with closing(open_metadata_store(root / "meta.db")) as store:
        paths = [s.load_spec["path"] for s in store.used_segments("dm")]
    rows: dict[int, dict[str, Any]] = {}
    facts = []
    for p in paths:
        for r in pq.read_table(p).to_pylist():
            rows[r["k"]] = r
        facts.append({d["name"]: d for d in read_segment_facts(p)["dimensions"]})
    return rows, facts


def test_the_writer_types_columns_from_the_dataframe(written: Path) -> None:
    stored, facts = _stored(written)
    assert len(stored) == 40
    for entries in facts:
        assert {n: (e["type"], e["columnType"]) for n, e in entries.items()} == {
            "k": ("long", "LONG"),
            "tags": ("string", "STRING"),
            "nums": ("auto", "ARRAY<LONG>"),
            "scores": ("auto", "ARRAY<DOUBLE>"),
            "meta": ("json", "COMPLEX<json>"),
            "attrs": ("json", "COMPLEX<json>"),
        }
    for _, k, tags, nums, scores, meta, attrs in _rows():
        row = stored[k]
        assert row["nums"] == nums and row["scores"] == scores, k
        assert (None if row["meta"] is None else json.loads(row["meta"])) == meta, k
        assert (None if row["attrs"] is None else json.loads(row["attrs"])) == attrs, k
        values = row["tags"] if isinstance(row["tags"], list) or row["tags"] is None else [row["tags"]]
        assert values == mv_row(tags, "SORTED_ARRAY"), k


@pytest.fixture(scope="module")
def broker(written: Path) -> Iterator[StrataProcess]:
    with serving(written) as process:
        yield process


def test_the_reader_gives_arrays_and_json_text(spark: Any, broker: StrataProcess) -> None:
    df = spark.read.format("strata").option("broker", broker.url).option("datasource", "dm").load()
    types = {f.name: f.dataType for f in df.schema.fields}
    assert types["tags"] == T.ArrayType(T.StringType()) and types["nums"] == T.ArrayType(T.LongType())
    assert types["scores"] == T.ArrayType(T.DoubleType()) and types["meta"] == T.StringType()
    got = {r["k"]: r for r in df.collect()}
    for time, k, tags, nums, scores, meta, _ in _rows():
        row = got[k]
        assert row["__time"].astimezone(dt.UTC) == time and row["nums"] == nums and row["scores"] == scores, k
        assert row["tags"] == mv_row(tags, "SORTED_ARRAY"), k
        assert (None if row["meta"] is None else json.loads(row["meta"])) == meta, k
