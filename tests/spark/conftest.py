"""One Spark session (local[2], no UI) for every Spark test, with the strata format registered."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    # workers must run this interpreter (pyarrow, strata_spark) and stay on loopback
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    from pyspark.sql import SparkSession

    from strata_spark import register

    session = (
        SparkSession.builder.master("local[2]")
        .appName("strata-spark-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    register(session)
    try:
        yield session
    finally:
        session.stop()
