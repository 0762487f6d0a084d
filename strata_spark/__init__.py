"""Strata for Spark: `df.write.format("strata")` (and, later, `spark.read.format("strata")`).

    import strata_spark
    strata_spark.register(spark)
    df.write.format("strata").option("datasource", "events").option("timestampColumn", "ts").save()

Executors need this package and Strata's own importable by the Python PySpark runs them on
(PYSPARK_PYTHON), and deep storage must be a directory every executor reaches.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

FORMAT = "strata"


def register(spark: SparkSession) -> None:
    """Register the `strata` data source with `spark`."""
    from strata_spark.source import StrataDataSource

    spark.dataSource.register(StrataDataSource)
