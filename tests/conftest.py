"""Shared fixtures: real ZooKeeper and memcached servers on free loopback ports, the sample data,
and one real cluster serving the sample for every test that only reads it."""

from __future__ import annotations

import hashlib
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.postgres import PostgresServer
from harness.tls_context import share_default_tls_context
from strata.cli.local_servers import MemcachedServer, ZooKeeperServer, free_port
from strata.data import WIKIPEDIA_INDEX_SPEC, WIKIPEDIA_SAMPLE
from tests.cluster.cluster_kit import wikipedia_cluster as start_wikipedia_cluster


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """What a test asked to show on every run, `record_property("shown", text)`, printed after the
    run (under `-n 2` the worker that ran the test cannot print it itself)."""
    for reports in terminalreporter.stats.values():
        for report in reports:
            if getattr(report, "when", None) == "call":
                for name, text in report.user_properties:
                    if name == "shown":
                        terminalreporter.write_line(f"\n{report.nodeid}:\n{text}")


def pytest_configure(config: pytest.Config) -> None:
    """The tests' httpx clients, one-off `httpx.get`/`post` calls included, share one default TLS
    context instead of building one each (harness.tls_context)."""
    share_default_tls_context()


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """With `-n 2` (scripts/test.sh): whole modules to each worker, the slow ones first."""
    from tests.workers import ModuleUnits

    return ModuleUnits(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """In an xdist worker, the slow units first (tests/workers.py); a plain run keeps file order."""
    if hasattr(config, "workerinput"):
        from tests.workers import order_items

        order_items(items)


@pytest.fixture(scope="session")
def zk_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    """One real ZooKeeper for the whole session; tests isolate themselves by znode base path."""
    server = ZooKeeperServer(port=free_port(), data_dir=tmp_path_factory.mktemp("zookeeper"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def zk_hosts(zk_server: ZooKeeperServer) -> str:
    return zk_server.address


@pytest.fixture(scope="session")
def memcached_server() -> Iterator[MemcachedServer]:
    server = MemcachedServer(port=free_port()).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """One real PostgreSQL for the whole session (Debian's package, run as the postgres user);
    tests isolate themselves with a database each (`postgres_url`). libpq finds the password
    through PGPASSFILE, as an operator's ~/.pgpass would hold it."""
    if not PostgresServer.available():
        pytest.skip("PostgreSQL is not installed (scripts/install-system-packages.sh test installs it)")
    server = PostgresServer().start()
    previous = os.environ.get("PGPASSFILE")
    os.environ["PGPASSFILE"] = str(server.pgpass)
    try:
        yield server
    finally:
        if previous is None:
            os.environ.pop("PGPASSFILE", None)
        else:
            os.environ["PGPASSFILE"] = previous
        server.remove()


@pytest.fixture
def postgres_url(postgres_server: PostgresServer, request: pytest.FixtureRequest) -> str:
    """A fresh, empty database on the session's PostgreSQL."""
    name = "t_" + hashlib.sha1(request.node.nodeid.encode()).hexdigest()[:12] + "_" + secrets.token_hex(3)
    return postgres_server.create_database(name)


@pytest.fixture(scope="session")
def wikipedia_sample() -> Path:
    return WIKIPEDIA_SAMPLE


@pytest.fixture(scope="session")
def wikipedia_index_spec() -> Path:
    return WIKIPEDIA_INDEX_SPEC


@pytest.fixture(scope="session")
def wikipedia_cluster(
    tmp_path_factory: pytest.TempPathFactory,
    zk_hosts: str,
    wikipedia_sample: Path,
    wikipedia_index_spec: Path,
) -> Iterator[dict[str, Any]]:
    """The sample as 24 hourly segments on two historicals and a ZooKeeper broker, started once for
    the session (tests/cluster, sql_api, sql_clients, spark: `cluster` in test_broker_cluster).
    Tests read it; one that stops a node starts it again and waits for every segment before it
    returns, one that adds a datasource adds its own, so no test sees another's traces."""
    with start_wikipedia_cluster(tmp_path_factory.mktemp("wikipedia-cluster"), zk_hosts, wikipedia_sample,
                                 wikipedia_index_spec) as cluster:  # fmt: skip
        yield cluster
