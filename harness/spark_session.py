"""A local Spark session set up for Strata: shared by the Spark tests and bench.spark_read."""

from __future__ import annotations

import os
import sys
from typing import Any


def local_session(app_name: str, quick_jit: bool = False, java_options: str = "") -> Any:
    """local[2], no UI, on loopback, UTC, workers on this interpreter, `strata` registered.

    `quick_jit` (tests): the driver's JIT stops at its first tier, as in the local sessions
    `strata ingest` starts (`LOCAL_JVM_OPTIONS`): for a suite's small jobs the optimising compiler
    spends more CPU compiling Spark than the jobs take. Benchmarks keep the JVM's default.
    `java_options` go to the driver's JVM as well (where local mode runs its tasks)."""
    # workers must run this interpreter (pyarrow, strata.spark) and stay on loopback
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    from pyspark.sql import SparkSession

    from strata.ingestion.spark_engine import LOCAL_JVM_OPTIONS
    from strata.ingestion.spark_gateway import gateway_without_preexec
    from strata.spark import register

    builder = (
        SparkSession.builder.master("local[2]")
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "2")
    )
    options = " ".join(o for o in (LOCAL_JVM_OPTIONS if quick_jit else "", java_options) if o)
    if options:
        builder = builder.config("spark.driver.extraJavaOptions", options)
    with gateway_without_preexec():
        session = builder.getOrCreate()
    register(session)
    return session
