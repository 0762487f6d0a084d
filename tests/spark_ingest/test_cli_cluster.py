"""`strata ingest` from the command line on a real standalone Spark cluster: a master and a
worker process on loopback, so the executors are other processes than the driver (they reach the
code through PYTHONPATH and deep storage through the shared directory, as on a real cluster).
`--engine auto` past `--spark-threshold` picks Spark, says so, and runs on `--spark-master`."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path

import orjson
import pyarrow.parquet as pq
import pytest

from strata.cli.local_servers import free_port
from strata.ingestion import ingest
from strata.ingestion.spark_engine import LOCAL_JVM_OPTIONS
from strata.storage import open_metadata_store

pytestmark = pytest.mark.timeout(240)


def _spark_class() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "bin" / "spark-class"


@contextmanager
def _started(daemons: list[tuple[list[str], Path, str]], env: dict[str, str]) -> Iterator[None]:
    """Spark daemons (spark-class execs java, so a pid is the JVM's) started together, each up once
    its `ready` line is logged: a worker retries until the master is up, so their start-ups overlap."""
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for args, log, _ in daemons:
            with open(log, "wb") as out:
                procs.append(subprocess.Popen([str(_spark_class()), *args], stdout=out, stderr=subprocess.STDOUT,
                                              env=env))  # fmt: skip
        deadline = time.monotonic() + 90
        for proc, (args, log, ready) in zip(procs, daemons, strict=True):
            while ready not in log.read_text(errors="replace"):
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"{args[0]} did not start:\n{log.read_text(errors='replace')[-3000:]}")
                time.sleep(0.1)
        yield
    finally:
        for proc in reversed(procs):
            proc.send_signal(signal.SIGTERM)
        for proc in reversed(procs):
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=15)


@pytest.fixture
def standalone(tmp_path: Path) -> Iterator[str]:
    repo = str(Path(__file__).resolve().parents[2])
    # the daemons, the driver and the executor run the JIT's quick first tier, as `strata ingest`
    # does in local mode: for one small job C2 spends more CPU compiling Spark than the job takes
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable,
           "PYTHONPATH": os.pathsep.join(p for p in (repo, os.environ.get("PYTHONPATH", "")) if p),
           "SPARK_DAEMON_JAVA_OPTS": LOCAL_JVM_OPTIONS}  # fmt: skip
    env.pop("SPARK_HOME", None)
    port = free_port()
    url = f"spark://127.0.0.1:{port}"
    master = ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
              "--webui-port", str(free_port())]  # fmt: skip
    worker = ["org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--cores", "2",
              "--memory", "2g", "--webui-port", str(free_port()), "--work-dir", str(tmp_path / "work"), url]  # fmt: skip
    daemons = [(master, tmp_path / "master.log", "I have been elected leader"),
               (worker, tmp_path / "worker.log", "Successfully registered with master")]  # fmt: skip
    with _started(daemons, env):
        yield url


def test_auto_past_the_threshold_runs_on_the_cluster_and_equals_local(standalone, tmp_path, wikipedia_sample):
    flags = ["--datasource", "wiki", "--input", str(wikipedia_sample), "--timestamp-column", "time",
             "--segment-granularity", "hour", "--max-rows-per-segment", "1000"]  # fmt: skip
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    done = subprocess.run(
        [sys.executable, "-m", "strata.cli.main", "ingest", *flags, "--json", "--spark-threshold", "1MiB",
         "--spark-master", standalone, "--spark-conf", "spark.executor.memory=1g",
         "--spark-conf", "spark.driver.host=127.0.0.1",
         "--spark-conf", f"spark.driver.extraJavaOptions={LOCAL_JVM_OPTIONS}",
         "--spark-conf", f"spark.executor.extraJavaOptions={LOCAL_JVM_OPTIONS}",
         "--deep-storage", str(tmp_path / "s" / "deep"), "--metadata", str(tmp_path / "s" / "m.db")],
        capture_output=True, text=True, timeout=200, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "strata ingest: engine spark (2.3 MiB of input is at least the 1.0 MiB threshold)" in done.stderr
    summary = orjson.loads(done.stdout.strip().splitlines()[-1])
    assert (
        summary["engine"] == "spark" and summary["rowsIngested"] == 39_244 and len(summary["segments"]) == 51
    )

    import argparse

    from strata.ingestion.cli import configure, spec_from_flags

    parser = argparse.ArgumentParser()
    configure(parser)
    spec = spec_from_flags(parser.parse_args(["ingest", *flags][1:]))
    local = ingest(
        spec, deep_storage=tmp_path / "l" / "deep", metadata=tmp_path / "l" / "m.db", engine="local"
    )
    with closing(open_metadata_store(tmp_path / "s" / "m.db")) as store:
        built = sorted(store.used_segments("wiki"), key=lambda s: (s.interval, s.partition_num))
    mine = sorted((w.segment for w in local.segments), key=lambda s: (s.interval, s.partition_num))
    assert [(s.interval, s.shard_spec.to_json()) for s in built] == [
        (s.interval, s.shard_spec.to_json()) for s in mine
    ]
    for a, b in zip(mine, built, strict=True):
        assert pq.read_table(a.load_spec["path"]).equals(pq.read_table(b.load_spec["path"]))
