"""Strata for Spark: `register(spark)` makes `spark.read.format("strata")` and
`df.write.format("strata")` available.

    import strata.spark
    strata.spark.register(spark)
    spark.read.format("strata").option("broker", "http://127.0.0.1:8082").option("datasource", "wiki").load()
    df.write.format("strata").option("datasource", "events").option("timestampColumn", "ts").save()

One call registers the Python data source and sets the session settings it needs:
- `spark.sql.python.filterPushdown.enabled=true`: Spark offers WHERE conjuncts to the reader,
  which sends them to the broker (off by default in Spark, and a reader that accepts filters
  fails while it is off);
- `spark.sql.execution.pyspark.udf.hideTraceback.enabled=true`: an error raised in a Python
  worker reaches the driver as its one-line message (`StrataError: cannot reach the Strata
  broker at ...`) instead of a Python traceback; it applies to Python UDFs too (set it back to
  false to debug a UDF).
Writing needs Strata importable by the Python PySpark runs executors on (PYSPARK_PYTHON), and
deep storage a directory every executor reaches.
"""

from __future__ import annotations

from typing import Any

from strata.spark.broker_client import StrataError
from strata.spark.source import StrataDataSource

FORMAT = "strata"
SPARK_SETTINGS = {
    "spark.sql.python.filterPushdown.enabled": "true",
    "spark.sql.execution.pyspark.udf.hideTraceback.enabled": "true",
}

__all__ = ["FORMAT", "SPARK_SETTINGS", "StrataDataSource", "StrataError", "register"]


def register(spark: Any) -> None:
    """Register the `strata` format on `spark` (a SparkSession) and apply `SPARK_SETTINGS`; table
    reads default to one partition per core of this session (its default parallelism)."""
    for key, value in SPARK_SETTINGS.items():
        spark.conf.set(key, value)
    cores = max(1, int(spark.sparkContext.defaultParallelism))
    bound = type(StrataDataSource.__name__, (StrataDataSource,), {"default_partitions": cores})
    spark.dataSource.register(bound)
