"""The one Spark session the Spark tests share (local[2], small shuffles, no UI, loopback only).

`SparkSession.getOrCreate` hands every caller the running session, so test packages that import
this fixture (or create a session while it runs) share one JVM.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest

SPARK_CONF = {
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.network.timeout": "60s",
    "spark.executor.heartbeatInterval": "10s",
}


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    pytest.importorskip("pyspark")
    from strata.ingestion.spark_engine import spark_session

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    session = spark_session("local[2]", SPARK_CONF)
    try:
        yield session
    finally:
        session.stop()
