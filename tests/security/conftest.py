"""One secured cluster for every test module here that asks for it (package scope)."""

from __future__ import annotations

import pytest

from tests.security.secured_cluster import secured_cluster


@pytest.fixture(scope="package")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    with secured_cluster(tmp_path_factory.mktemp("secured")) as c:
        yield c
