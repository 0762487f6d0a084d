"""Throttling, 5xx answers and connection resets between Strata and S3 (a fault-injecting proxy in
front of moto): pushes and pulls succeed after retries, and what they move is whole."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from harness.fault_proxy import FaultProxy
from harness.s3_server import S3Server
from strata.storage.retry import Backoff
from strata.storage.s3_deep_storage import S3DeepStorage
from timeline import DataSegment, Interval

pytestmark = pytest.mark.timeout(120)


def _built(tmp_path: Path) -> tuple[Path, DataSegment]:
    d = tmp_path / "built"
    d.mkdir()
    pq.write_table(pa.table({"__time": list(range(50_000))}), d / "index.parquet")
    return d, DataSegment("w", Interval.parse("2020-01-01/2020-01-02"), "v1")


def _through(proxy: FaultProxy, bucket: str) -> S3DeepStorage:
    return S3DeepStorage(
        f"s3://{bucket}/deep", endpoint=proxy.endpoint, backoff=Backoff(attempts=4, first_s=0.05)
    )


@pytest.mark.parametrize(
    "faults",
    [
        ["slowdown", "500", "reset"],
        ["reset"] * 7,
    ],  # the client's own retries; past them, the whole-object ones
    ids=["throttled-5xx-reset", "more-than-the-client-retries"],
)
def test_pull_and_push_succeed_through_faults(
    s3_server: S3Server, s3_bucket: str, tmp_path: Path, faults: list[str]
) -> None:
    built, segment = _built(tmp_path)
    data = (built / "index.parquet").read_bytes()
    upstream = ("127.0.0.1", s3_server.port)
    pushed = S3DeepStorage(f"s3://{s3_bucket}/deep", endpoint=s3_server.endpoint).push(built, segment)
    # the pull and the second push (to a key of its own) each through their own proxy, side by side:
    # most of their time is the client's backoff between attempts
    with (
        FaultProxy(upstream, faults) as pulls,
        FaultProxy(upstream, faults) as pushes,
        ThreadPoolExecutor(2) as pool,
    ):
        pulling = pool.submit(_through(pulls, s3_bucket).pull, pushed, tmp_path / "cache")
        pushing = pool.submit(_through(pushes, s3_bucket).push, built, segment)
        got, again = pulling.result(), pushing.result()
        assert pulls.injected == faults and pushes.injected == faults
    assert (got / "index.parquet").read_bytes() == data
    with s3_server.filesystem().open_input_stream(f"{s3_bucket}/{again.load_spec['key']}") as f:
        assert f.read() == data
    assert again.load_spec["sha256"] == pushed.load_spec["sha256"]
