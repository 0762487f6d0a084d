"""A real S3 server (moto's server mode) for the whole session, and a fresh bucket per test."""

from __future__ import annotations

import hashlib
import os
import secrets
from collections.abc import Iterator

import pytest

from harness.s3_server import S3Server, client_env


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """moto on 127.0.0.1 and a free port; credentials for it in the environment, where the AWS
    chain (and every node process a test starts) finds them."""
    server = S3Server(log=tmp_path_factory.mktemp("s3") / "moto.log").start()
    saved = {k: os.environ.get(k) for k in client_env()}
    os.environ.update(client_env())
    try:
        yield server
    finally:
        server.stop()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@pytest.fixture
def s3_bucket(s3_server: S3Server, request: pytest.FixtureRequest) -> str:
    """A fresh, empty bucket for this test."""
    name = "t-" + hashlib.sha1(request.node.nodeid.encode()).hexdigest()[:10] + "-" + secrets.token_hex(3)
    s3_server.create_bucket(name)
    return name
