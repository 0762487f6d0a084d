"""The session Strata starts for an ingestion runs its driver's JIT at the first tier in local mode
(the JVM only schedules Python tasks) and its Python workers' allocator on transparent huge pages,
and a `--spark-conf` setting still wins."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest

from strata.ingestion.spark_engine import LOCAL_JVM_OPTIONS, LOCAL_WORKER_MALLOC, session_defaults


def test_the_local_session_jvm_runs_with_the_options(spark: Any) -> None:
    if spark.sparkContext.appName != "strata ingest":  # a session another test package started
        return
    runtime = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
    assert "-XX:TieredStopAtLevel=1" in list(runtime.getInputArguments())


def test_only_local_sessions_get_them() -> None:
    assert session_defaults("local[*]")["spark.driver.extraJavaOptions"] == LOCAL_JVM_OPTIONS
    assert "spark.driver.extraJavaOptions" not in session_defaults("spark://head:7077")


def _worker_memory(_: int) -> tuple[str | None, int]:
    """In a Python worker: its GLIBC_TUNABLES, and how many kB of huge pages 64 MiB written
    through Arrow's system pool (the pool ingestion builds its columns in) added."""
    import os

    import pyarrow as pa
    import pyarrow.compute as pc

    def huge() -> int:
        with open("/proc/self/smaps_rollup") as f:
            return sum(int(line.split()[1]) for line in f if line.startswith("AnonHugePages:"))

    numbers = pa.array(range(8 << 20), pa.int64())
    before = huge()
    kept = pc.add(numbers, 1, memory_pool=pa.system_memory_pool())
    added = huge() - before
    del kept
    return os.environ.get("GLIBC_TUNABLES"), added


def test_local_python_workers_allocate_on_huge_pages(spark: Any) -> None:
    if spark.sparkContext.appName != "strata ingest" or "GLIBC_TUNABLES" in os.environ:
        pytest.skip("a session Strata did not start with its defaults")
    got = spark.sparkContext.parallelize([0, 1], 2).map(_worker_memory).collect()
    assert [tunables for tunables, _ in got] == [LOCAL_WORKER_MALLOC] * 2
    thp = Path("/sys/kernel/mm/transparent_hugepage/enabled")
    if thp.exists() and "[madvise]" in thp.read_text():  # only asked-for memory gets huge pages
        assert all(huge > 0 for _, huge in got), got  # any at all: without the tunable, none


def test_worker_malloc_only_for_local_sessions_and_not_over_the_callers(monkeypatch: Any) -> None:
    monkeypatch.delenv("GLIBC_TUNABLES", raising=False)
    assert session_defaults("local[2]")["spark.executorEnv.GLIBC_TUNABLES"] == LOCAL_WORKER_MALLOC
    assert "spark.executorEnv.GLIBC_TUNABLES" not in session_defaults("spark://head:7077")
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.malloc.arena_max=2")  # the workers inherit the caller's
    assert "spark.executorEnv.GLIBC_TUNABLES" not in session_defaults("local[2]")


def test_the_jvm_ignores_sigint_and_stays_in_the_callers_process_group(spark: Any) -> None:
    """Launched without PySpark's `preexec_fn` (Python run between fork and exec in a threaded
    process crashed the child), yet as it would: Ctrl-C does not reach it, and a task's shutdown of
    its process group does."""
    jvm = spark.sparkContext._gateway.proc.pid
    with open(f"/proc/{jvm}/status") as f:
        ignored = int(next(line.split()[1] for line in f if line.startswith("SigIgn:")), 16)
    assert ignored & (1 << (signal.SIGINT - 1))
    assert os.getpgid(jvm) == os.getpgid(0)
    assert signal.getsignal(signal.SIGINT) is not signal.SIG_IGN  # the caller's own, given back


def test_the_gateway_launch_is_restored_after() -> None:
    from pyspark import java_gateway as gateway_module

    from strata.ingestion.spark_gateway import gateway_without_preexec

    java_gateway: Any = gateway_module
    before = java_gateway.Popen
    with gateway_without_preexec():
        assert java_gateway.Popen is not before
    assert java_gateway.Popen is before
