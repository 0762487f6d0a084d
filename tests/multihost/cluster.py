"""A Strata cluster over network namespaces: every service on a host of its own, nothing shared
but the network (ZooKeeper, PostgreSQL, an S3 server, two historicals, a real-time node, a broker,
a Spark master and two workers, and a driver host for Spark jobs and `strata ingest`).

The test process is the client host (the bridge's address). Each service binds its host's address
on its usual port; the historicals bind every address and announce their own (as behind NAT).
Every process is stopped by its pid; the lab then kills anything left in its namespaces.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

import httpx

from harness.netns import Host, NetnsLab
from harness.postgres import PostgresServer
from harness.processes import StrataProcess
from harness.s3_server import S3Server, client_env
from strata.cli.local_servers import ZooKeeperServer
from strata.ingestion.spark_engine import LOCAL_JVM_OPTIONS

REPO = Path(__file__).resolve().parents[2]
HOSTS = ("zk", "pg", "s3", "hist1", "hist2", "rt", "broker", "master", "worker1", "worker2", "driver")
BUCKET = "strata"
RT_SPEC = {
    "dataSchema": {
        "dataSource": "live",
        "timestampSpec": {"column": "ts", "format": "iso"},
        "dimensionsSpec": {"dimensions": ["k"]},
        "metricsSpec": [
            {"type": "count", "name": "count"},
            {"type": "longSum", "name": "n", "fieldName": "n"},
        ],
        "granularitySpec": {"segmentGranularity": "hour", "queryGranularity": "none", "rollup": False},
    },
    "tuningConfig": {"type": "realtime", "rejectionPolicy": {"type": "none"}, "windowPeriod": "PT10M"},
}


def wait_until(predicate: Callable[[], object], what: str, timeout: float = 60.0,
               logs: Sequence[StrataProcess] = ()) -> None:  # fmt: skip
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.HTTPError):
            if predicate():
                return
        time.sleep(0.2)
    tails = "\n".join(f"--- {p.log_path.name}\n{p.log_text()[-3000:]}" for p in logs)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}\n{tails}")


@dataclass
class Daemon:
    """A non-Strata child (a Spark daemon) on a host, stopped by its pid."""

    argv: list[str]
    log: Path
    env: dict[str, str]
    proc: subprocess.Popen[bytes] | None = None

    def spawn(self) -> Daemon:
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(self.argv, stdout=out, stderr=subprocess.STDOUT, env=self.env,
                                         stdin=subprocess.DEVNULL)  # fmt: skip
        return self

    def wait(self, ready: str, timeout: float = 120.0) -> Daemon:
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        while ready not in self.log.read_text(errors="replace"):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"{self.argv[4:6]} did not start:\n{self.log.read_text(errors='replace')[-3000:]}"
                )
            time.sleep(0.3)
        return self

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


class OwnThreads:
    """Start-ups run side by side, each on a thread of its own that lives until `release()`: a store
    dies with the thread that started it (its parent-death signal follows the forking thread), so
    never on a short-lived worker thread. The test's thread restarts stores itself later."""

    def __init__(self) -> None:
        self._release = threading.Event()
        self._threads: list[tuple[str, threading.Thread, threading.Event]] = []
        self._errors: dict[str, BaseException] = {}

    def run(self, name: str, start: Callable[[], object]) -> None:
        started = threading.Event()

        def own() -> None:
            try:
                start()
            except BaseException as e:  # raised on the caller's thread by `wait`
                self._errors[name] = e
            finally:
                started.set()
            self._release.wait()

        thread = threading.Thread(target=own, name=f"start-{name}", daemon=True)
        thread.start()
        self._threads.append((name, thread, started))

    def wait(self, timeout: float = 180.0) -> None:
        """Every start-up done; the first failure raised here."""
        deadline = time.monotonic() + timeout
        for name, _, started in self._threads:
            if not started.wait(max(deadline - time.monotonic(), 0.0)):
                raise TimeoutError(f"{name} did not start within {timeout:.0f}s")
        for name, error in self._errors.items():
            raise RuntimeError(f"{name} did not start") from error

    def release(self) -> None:
        self._release.set()
        for _, thread, _ in self._threads:
            thread.join(10)


@dataclass
class HostsCluster:
    lab: NetnsLab
    zk: ZooKeeperServer | None = None
    pg: PostgresServer | None = None
    s3: S3Server | None = None
    nodes: dict[str, StrataProcess] = field(default_factory=dict)
    spark: list[Daemon] = field(default_factory=list)
    metadata: str = ""
    owners: OwnThreads = field(default_factory=OwnThreads)

    def __post_init__(self) -> None:
        """The stores on their hosts, not started yet (`start_stores`); the password every process
        gets for PostgreSQL is known from here on."""
        zk, pg, s3 = self.host("zk"), self.host("pg"), self.host("s3")
        self.zk = ZooKeeperServer(
            2181, data_dir=zk.dir("zookeeper"), host=zk.address, command_prefix=tuple(zk.prefix)
        )
        # PostgreSQL runs as the postgres user: its directory is its own temporary one
        self.pg = PostgresServer(port=5432, host=pg.address, command_prefix=list(pg.prefix))
        self.s3 = S3Server(
            port=9000, host=s3.address, log=s3.dir("s3") / "moto.log", command_prefix=s3.prefix
        )

    # -- addresses -------------------------------------------------------------------------------
    def host(self, name: str) -> Host:
        return self.lab[name]

    @property
    def zk_connect(self) -> str:
        return f"{self.host('zk').address}:2181"

    @property
    def deep_storage(self) -> str:
        return f"s3://{BUCKET}/deep"

    @property
    def s3_endpoint(self) -> str:
        return f"http://{self.host('s3').address}:9000"

    @property
    def spark_master(self) -> str:
        return f"spark://{self.host('master').address}:7077"

    @property
    def broker(self) -> StrataProcess:
        return self.nodes["broker"]

    def env(self) -> dict[str, str]:
        """What every process of ours gets: S3 credentials through the AWS chain, the metadata
        store's password through libpq's PGPASSWORD, Strata importable from the source tree."""
        assert self.pg is not None
        path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
        return {**os.environ, **client_env(), "PGPASSWORD": self.pg.password, "PYTHONPATH": path,
                "PYSPARK_PYTHON": sys.executable}  # fmt: skip

    def storage_flags(self) -> list[str]:
        return [
            "--deep-storage",
            self.deep_storage,
            "--s3-endpoint",
            self.s3_endpoint,
            "--metadata",
            self.metadata,
        ]

    # -- services --------------------------------------------------------------------------------
    def start_stores(self) -> None:
        """ZooKeeper, PostgreSQL and S3 started side by side (each a JVM, an initdb or an import
        of moto: seconds of their own), then awaited together."""
        zk_server, pg_server, s3_server = self.zk, self.pg, self.s3
        assert zk_server is not None and pg_server is not None and s3_server is not None

        def postgres() -> None:
            pg_server.start()
            self.metadata = pg_server.create_database("strata")

        def moto() -> None:
            s3_server.start()
            s3_server.create_bucket(BUCKET)

        self.owners.run("ZooKeeper", zk_server.start)
        self.owners.run("PostgreSQL", postgres)
        self.owners.run("S3", moto)
        self.owners.wait()

    def strata(self, name: str, subcommand: str, port: int, *args: str) -> StrataProcess:
        host = self.host(name)
        process = StrataProcess(subcommand, [*args], host.root / f"{subcommand}.log", port=port, env=self.env(),
                                host=host.address, command_prefix=host.prefix)  # fmt: skip
        self.nodes[name] = process
        return process

    def start_nodes(self) -> None:
        """Every node at once (each on its host), then each awaited on its health check."""
        self.launch_nodes()
        self.wait_nodes()

    def launch_nodes(self) -> None:
        """Every node started, none awaited (`wait_nodes`)."""
        zk = ["--zk", self.zk_connect]
        for name in ("hist1", "hist2"):
            host = self.host(name)
            # bound to every address of its host, announcing the one others reach (as behind NAT)
            self.strata(name, "historical", 8083, *zk, *self.storage_flags(), "--bind", "0.0.0.0",
                        "--advertise", host.address, "--segment-cache", str(host.dir("segment-cache")),
                        "--replicas", "2", "--poll-period", "1", "--drop-delay", "1")  # fmt: skip
        rt = self.host("rt")
        spec = rt.dir("conf") / "live.json"
        spec.write_text(json.dumps(RT_SPEC))
        self.strata("rt", "realtime", 8100, *zk, *self.storage_flags(), "--spec", str(spec),
                    "--base-dir", str(rt.dir("realtime")), "--drop-delay", "1")  # fmt: skip
        self.strata("broker", "broker", 8082, *zk, "--cache", "none")
        for process in self.nodes.values():
            process.start(wait=None)

    def wait_nodes(self) -> None:
        for process in self.nodes.values():
            process.wait_http("/status/health", timeout=120)

    def start_spark(self) -> None:
        self.launch_spark()
        self.wait_spark()

    def launch_spark(self) -> None:
        """The Spark master and workers started, not awaited (`wait_spark`): they need only the
        network, so they start beside the stores."""
        import pyspark

        spark_class = str(Path(pyspark.__file__).parent / "bin" / "spark-class")
        master = self.host("master")
        env = {k: v for k, v in self.env().items() if k != "SPARK_HOME"}
        env["SPARK_DAEMON_JAVA_OPTS"] = LOCAL_JVM_OPTIONS  # see spark_conf
        self.spark.append(Daemon(
            [*master.prefix, spark_class, "org.apache.spark.deploy.master.Master", "--host", master.address,
             "--port", "7077", "--webui-port", "8080"],
            master.root / "master.log", {**env, "SPARK_LOCAL_IP": master.address},
        ).spawn())  # fmt: skip
        for name in ("worker1", "worker2"):  # a worker retries until the master is up: start all at once
            worker = self.host(name)
            self.spark.append(Daemon(
                [*worker.prefix, spark_class, "org.apache.spark.deploy.worker.Worker", "--host", worker.address,
                 "--cores", "1", "--memory", "1g", "--webui-port", "8081", "--work-dir", str(worker.dir("work")),
                 self.spark_master],
                worker.root / "worker.log", {**env, "SPARK_LOCAL_IP": worker.address},
            ).spawn())  # fmt: skip

    def wait_spark(self) -> None:
        self.spark[0].wait("I have been elected leader")
        for daemon in self.spark[1:]:
            daemon.wait("Successfully registered with master")

    def spark_conf(self) -> dict[str, str]:
        """The drivers' and executors' settings. Their JVMs (and the daemons') run the JIT's quick
        first tier, as `strata ingest` does in local mode: each lives for one small job, for which
        the optimising compiler would spend more CPU compiling Spark than the job takes."""
        driver = self.host("driver").address
        conf = {"spark.driver.host": driver, "spark.driver.bindAddress": driver, "spark.executor.memory": "512m",
                "spark.executor.cores": "1", "spark.cores.max": "2", "spark.ui.enabled": "false",
                "spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2",
                "spark.driver.extraJavaOptions": LOCAL_JVM_OPTIONS,
                "spark.executor.extraJavaOptions": LOCAL_JVM_OPTIONS}  # fmt: skip
        for key, value in client_env().items():
            conf[f"spark.executorEnv.{key}"] = value
        return conf

    def on_driver(self, argv: Sequence[str], timeout: float = 240.0) -> subprocess.CompletedProcess[str]:
        """Run a command on the driver host (a Spark driver, `strata ingest`)."""
        driver = self.host("driver")
        env = {**self.env(), "SPARK_LOCAL_IP": driver.address}
        env.pop("SPARK_HOME", None)
        return subprocess.run([*driver.prefix, *argv], capture_output=True, text=True, timeout=timeout, env=env,
                              stdin=subprocess.DEVNULL, cwd=driver.root)  # fmt: skip

    def query(self, body: dict[str, Any], timeout: float = 60.0) -> Any:
        response = httpx.post(f"{self.broker.url}/druid/v2/", json=body, timeout=timeout)
        response.raise_for_status()
        return response.json()

    def stop(self) -> None:
        for daemon in reversed(self.spark):
            with contextlib.suppress(Exception):
                daemon.stop()
        for process in reversed(list(self.nodes.values())):
            try:
                process.stop()
            except Exception:
                process.kill()
        for server in (self.s3, self.zk):
            if server is not None:
                with contextlib.suppress(Exception):
                    server.stop()
        if self.pg is not None:
            with contextlib.suppress(Exception):
                self.pg.remove()
        self.owners.release()


@contextlib.contextmanager
def hosts_cluster(base: Path) -> Iterator[HostsCluster]:
    with NetnsLab(base, HOSTS) as lab:
        cluster = HostsCluster(lab)
        try:
            cluster.launch_spark()
            cluster.start_stores()
            assert cluster.pg is not None
            # the test process is a client host too: libpq finds the password where nodes do
            with mock.patch.dict(os.environ, {"PGPASSWORD": cluster.pg.password, **client_env()}):
                cluster.wait_spark()
                yield cluster
        finally:
            cluster.stop()
