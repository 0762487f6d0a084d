"""One Spark session (local[2], no UI) for every Spark test, with the strata format registered."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from harness.spark_session import local_session


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    session = local_session("strata-spark-tests", quick_jit=True)
    try:
        yield session
    finally:
        session.stop()
