"""The session Strata starts for an ingestion runs its driver's JIT at the first tier in local mode
(the JVM only schedules Python tasks), and a `--spark-conf` setting still wins."""

from __future__ import annotations

from typing import Any

from ingestion.spark_engine import LOCAL_JVM_OPTIONS, session_defaults


def test_the_local_session_jvm_runs_with_the_options(spark: Any) -> None:
    if spark.sparkContext.appName != "strata ingest":  # a session another test package started
        return
    runtime = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
    assert "-XX:TieredStopAtLevel=1" in list(runtime.getInputArguments())


def test_only_local_sessions_get_them() -> None:
    assert session_defaults("local[*]")["spark.driver.extraJavaOptions"] == LOCAL_JVM_OPTIONS
    assert "spark.driver.extraJavaOptions" not in session_defaults("spark://head:7077")
