"""A task's batches in Spark's declared Arrow schema (`conform_batch`): `__time` declared NOT NULL,
so a batch that would hand Spark a null there fails the task with a clear error instead of being
read by Spark as the null slot's value (epoch 0)."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyspark.sql.pandas.types import to_arrow_schema

from strata.spark.broker_client import StrataError
from strata.spark.results import conform_batch, table_schema

TYPES = {"__time": "LONG", "channel": "STRING", "added": "LONG"}


def target() -> pa.Schema:
    return to_arrow_schema(table_schema(TYPES), timezone="UTC")


def test_time_is_declared_not_null_and_the_rest_nullable() -> None:
    schema = table_schema(TYPES)
    assert [(f.name, f.nullable) for f in schema.fields] == [
        ("__time", False),
        ("channel", True),
        ("added", True),
    ]
    assert not target().field("__time").nullable


def test_a_scan_batch_becomes_the_declared_schema() -> None:
    batch = pa.record_batch(
        {"__time": pa.array([1_442_018_818_771, 0]), "channel": pa.array(["#en", None]), "added": [3, None]}
    )
    got = conform_batch(batch, target())
    assert got.schema == target()
    assert got.column(0).cast(pa.int64()).to_pylist() == [1_442_018_818_771_000, 0]  # microseconds
    assert got.column(1).to_pylist() == ["#en", None]


@pytest.mark.parametrize(
    "columns",
    [
        {"__time": pa.array([1, None], pa.int64()), "channel": ["a", "b"], "added": [1, 2]},
        {"channel": ["a", "b"], "added": [1, 2]},  # no __time at all: it would be all nulls
    ],
)
def test_nulls_in_a_not_null_column_fail_the_task(columns: dict[str, object]) -> None:
    with pytest.raises(StrataError, match=r"__time has \d+ null value\(s\) but is declared NOT NULL"):
        conform_batch(pa.record_batch(columns), target())
