"""Shared fixtures: real ZooKeeper and memcached servers on free loopback ports, the sample data."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from strata.data import WIKIPEDIA_INDEX_SPEC, WIKIPEDIA_SAMPLE
from strata.local_servers import MemcachedServer, ZooKeeperServer, free_port


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
def wikipedia_sample() -> Path:
    return WIKIPEDIA_SAMPLE


@pytest.fixture(scope="session")
def wikipedia_index_spec() -> Path:
    return WIKIPEDIA_INDEX_SPEC
