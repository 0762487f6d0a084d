"""Shared fixtures: real ZooKeeper and memcached servers on free loopback ports, the sample data."""

from __future__ import annotations

import hashlib
import os
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.postgres import PostgresServer
from strata.cli.local_servers import MemcachedServer, ZooKeeperServer, free_port
from strata.data import WIKIPEDIA_INDEX_SPEC, WIKIPEDIA_SAMPLE


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
