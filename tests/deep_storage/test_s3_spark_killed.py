"""A Spark ingestion killed between its tasks' pushes and its driver's publish leaves only objects
no metadata row names, and `strata segments cleanup` removes every one of them."""

from __future__ import annotations

import signal
from contextlib import closing
from pathlib import Path

import pytest

from harness.s3_server import S3Server
from strata.storage import open_deep_storage, open_metadata_store
from tests.deep_storage.test_s3_deep_storage import killed_at_publish, strata

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


def test_cleanup_after_a_spark_job_killed_mid_write(
    s3_server: S3Server, s3_bucket: str, tmp_path: Path
) -> None:
    # the driver dies the moment it would publish: every task has pushed, nothing is published
    _, url, meta, driver = killed_at_publish(
        s3_server, s3_bucket, tmp_path, "sparkkilled", "spark", timeout=240
    )
    assert driver.returncode == -signal.SIGKILL, driver.stderr[-3000:]
    deep = open_deep_storage(url, s3_endpoint=s3_server.endpoint)
    left = list(deep.stored())
    assert len([o for o in left if o.location.endswith("index.parquet")]) == 6, left  # pushed by tasks
    with closing(open_metadata_store(meta)) as store:
        assert store.segments(include_unused=True) == []  # nothing published
    flags = ["--metadata", meta, "--deep-storage", url, "--s3-endpoint", s3_server.endpoint]
    dry = strata("segments", "cleanup", *flags, "--min-age", "0")
    assert dry.returncode == 0 and f"{len(left)} object(s) to delete (dry run" in dry.stdout, (
        dry.stdout + dry.stderr
    )
    applied = strata("segments", "cleanup", *flags, "--min-age", "0", "--apply")
    assert applied.returncode == 0 and f"deleted {len(left)} object(s)" in applied.stdout, applied.stderr
    assert list(deep.stored()) == []
