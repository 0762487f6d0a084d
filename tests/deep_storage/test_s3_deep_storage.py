"""S3 deep storage against a real S3 server (moto): round trip, checksums, retries, cleanup after a kill."""

from __future__ import annotations

import hashlib
import json
import pickle
import signal
import subprocess
import sys
import threading
import time
from contextlib import closing
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from harness.s3_server import S3Server
from strata.storage import open_deep_storage, open_metadata_store
from strata.storage.deep_storage import ChecksumMismatch, DeepStorageError
from strata.storage.retry import Backoff
from strata.storage.s3_deep_storage import S3DeepStorage
from tests.cluster.cluster_kit import synthetic_spec, write_rows
from timeline import DataSegment, Interval

pytestmark = pytest.mark.timeout(120)


def _segment_dir(tmp_path: Path, rows: int = 20_000) -> tuple[Path, DataSegment]:
    d = tmp_path / "built"
    d.mkdir()
    pq.write_table(
        pa.table({"__time": list(range(rows)), "x": [i % 7 for i in range(rows)]}), d / "index.parquet"
    )
    return d, DataSegment("wiki", Interval.parse("2020-01-01/2020-01-02"), "2020-02-01T00:00:00.000Z")


def _deep(s3_server: S3Server, bucket: str, **kw: object) -> S3DeepStorage:
    deep = open_deep_storage(f"s3://{bucket}/deep/", s3_endpoint=s3_server.endpoint)
    assert isinstance(deep, S3DeepStorage)
    for k, v in kw.items():
        setattr(deep, k, v)
    return deep


def test_push_pull_delete_round_trip(s3_server: S3Server, s3_bucket: str, tmp_path: Path) -> None:
    deep = _deep(s3_server, s3_bucket)
    built, segment = _segment_dir(tmp_path)
    data = (built / "index.parquet").read_bytes()
    pushed = deep.push(built, segment)
    spec = pushed.load_spec
    assert spec["type"] == "s3" and spec["bucket"] == s3_bucket and spec["key"].startswith("deep/wiki/")
    assert spec["sha256"] == hashlib.sha256(data).hexdigest() and pushed.size == len(data)
    with s3_server.filesystem().open_input_stream(f"{s3_bucket}/{spec['key']}") as f:
        assert f.read() == data  # the object is the file, byte for byte
    again = deep.push(built, segment)  # a repeated push never overwrites: a key of its own
    assert again.load_spec["key"] != spec["key"]
    copy = pickle.loads(pickle.dumps(deep))  # as Spark ships it to tasks: the client is rebuilt
    got = copy.pull(pushed, tmp_path / "cache")
    assert (got / "index.parquet").read_bytes() == data
    assert sorted(o.location for o in deep.stored()) == sorted(
        f"{s3_bucket}/{s.load_spec['key']}" for s in (pushed, again)
    )
    deep.delete(pushed)
    deep.delete(again)
    assert list(deep.stored()) == []


@pytest.mark.parametrize("damage", ["flipped byte", "truncated"])
def test_a_damaged_object_is_refused(
    s3_server: S3Server, s3_bucket: str, tmp_path: Path, damage: str
) -> None:
    deep = _deep(s3_server, s3_bucket, backoff=Backoff(attempts=2, first_s=0.05))
    built, segment = _segment_dir(tmp_path)
    pushed = deep.push(built, segment)
    data = bytearray((built / "index.parquet").read_bytes())
    if damage == "truncated":
        data = data[:-100]
    else:
        data[len(data) // 2] ^= 0xFF
    with s3_server.filesystem().open_output_stream(deep.location_of(pushed)) as out:
        out.write(bytes(data))
    with pytest.raises(ChecksumMismatch, match=pushed.id):
        deep.pull(pushed, tmp_path / "cache")
    assert not (tmp_path / "cache" / "index.parquet").exists()


def test_a_pull_outlasts_a_server_restart(s3_server: S3Server, s3_bucket: str, tmp_path: Path) -> None:
    deep = _deep(s3_server, s3_bucket, backoff=Backoff(attempts=40, first_s=0.2, max_s=1.0))
    built, segment = _segment_dir(tmp_path)
    pushed = deep.push(built, segment)
    got: list[Path | BaseException] = []

    def pull() -> None:
        while s3_server.serving():  # the pull starts once the server is gone
            time.sleep(0.01)
        try:
            got.append(deep.pull(pushed, tmp_path / "cache"))
        except BaseException as e:
            got.append(e)

    puller = threading.Thread(target=pull, daemon=True)
    puller.start()
    # from this (long-lived) thread: the server dies with the thread that started it (pdeathsig)
    s3_server.restart(down_s=2.0)
    puller.join(60)
    assert got and isinstance(got[0], Path), got
    assert (got[0] / "index.parquet").read_bytes() == (built / "index.parquet").read_bytes()


def test_bad_urls_are_refused_with_the_reason() -> None:
    with pytest.raises(DeepStorageError, match="s3://BUCKET"):
        open_deep_storage("s3:///prefix")
    with pytest.raises(DeepStorageError, match="unsupported deep storage"):
        open_deep_storage("gs://bucket/prefix")
    with pytest.raises(DeepStorageError, match="endpoint"):
        open_deep_storage("s3://bucket/p", s3_endpoint="ftp://host:1")


KILLED_AT_PUBLISH = """
import os, signal, sys
from strata.ingestion.api import ingest
from strata.storage.sqlite_store import SQLiteMetadataStore
def die(self, segments, *, overwrite):  # every segment pushed, none published: the process dies
    os.kill(os.getpid(), signal.SIGKILL)
SQLiteMetadataStore.publish = die
engine = sys.argv[5] if len(sys.argv) > 5 else "local"
conf = {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"}
ingest(sys.argv[1], deep_storage=sys.argv[2], metadata=sys.argv[3], s3_endpoint=sys.argv[4], engine=engine,
       **({"spark_master": "local[2]", "spark_conf": conf} if engine == "spark" else {}))
"""


def strata(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "strata.cli.main", *args], capture_output=True, text=True, timeout=60
    )


def killed_at_publish(
    s3: S3Server, bucket: str, tmp_path: Path, data_source: str, engine: str, timeout: float
) -> tuple[Path, str, str, subprocess.CompletedProcess[str]]:
    """Six hourly rows ingested into s3://BUCKET/deep by a child killed the moment it would publish
    (every segment pushed, none published): the spec, deep storage URL, metadata path, the child."""
    rows = write_rows(tmp_path / "rows.json", [
        {"ts": f"2020-01-01T{h:02d}:00:00Z", "k": f"v{h % 3}", "n": h} for h in range(6)
    ])  # fmt: skip
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(synthetic_spec(data_source, rows, "hour")))
    url, meta = f"s3://{bucket}/deep", str(tmp_path / "meta.db")
    script = [sys.executable, "-c", KILLED_AT_PUBLISH, str(spec), url, meta, s3.endpoint, engine]
    return spec, url, meta, subprocess.run(script, capture_output=True, text=True, timeout=timeout)


def test_cleanup_removes_what_a_killed_ingestion_pushed(
    s3_server: S3Server, s3_bucket: str, tmp_path: Path
) -> None:
    spec, url, meta, child = killed_at_publish(s3_server, s3_bucket, tmp_path, "killed", "local", timeout=60)
    assert child.returncode == -signal.SIGKILL, child.stderr
    deep = _deep(s3_server, s3_bucket)
    left = list(deep.stored())
    assert len(left) == 6  # six hourly segments pushed, nothing published
    with closing(open_metadata_store(meta)) as store:
        assert store.segments(include_unused=True) == []
    flags = ["--metadata", meta, "--deep-storage", url, "--s3-endpoint", s3_server.endpoint]
    young = strata("segments", "cleanup", *flags)  # default minimum age: a running ingestion's pushes stay
    assert young.returncode == 0 and "0 object(s) to delete" in young.stdout and "6 younger" in young.stdout
    dry = strata("segments", "cleanup", *flags, "--min-age", "0")
    assert dry.returncode == 0 and "6 object(s) to delete (dry run" in dry.stdout, dry.stderr
    assert len(list(deep.stored())) == 6
    # a published ingestion beside them: its objects are named by metadata rows and stay
    done = strata("ingest", str(spec), *flags)
    assert done.returncode == 0, done.stderr
    applied = strata("segments", "cleanup", *flags, "--min-age", "0", "--apply")
    assert applied.returncode == 0 and "deleted 6 object(s)" in applied.stdout, applied.stderr
    with closing(open_metadata_store(meta)) as store:
        published = {deep.location_of(s) for s in store.used_segments("killed")}
    assert {o.location for o in deep.stored()} == published and len(published) == 6


def test_kill_deletes_unused_segments_objects_and_rows(
    s3_server: S3Server, s3_bucket: str, tmp_path: Path
) -> None:
    rows = write_rows(
        tmp_path / "rows.json", [{"ts": f"2020-01-01T{h:02d}:00:00Z", "k": "a", "n": h} for h in range(3)]
    )
    url, meta = f"s3://{s3_bucket}/deep", str(tmp_path / "meta.db")
    from strata.ingestion.api import ingest

    summary = ingest(synthetic_spec("gone", rows, "hour"), deep_storage=url, metadata=meta,
                     s3_endpoint=s3_server.endpoint, engine="local")  # fmt: skip
    ids = [w.segment.id for w in summary.segments]
    flags = ["--metadata", meta, "--deep-storage", url, "--s3-endpoint", s3_server.endpoint]
    refused = strata("segments", "kill", ids[0], *flags)
    assert refused.returncode == 1 and "still used: drop them first" in refused.stderr
    assert strata("segments", "drop", ids[0], "--metadata", meta).returncode == 0
    killed = strata("segments", "kill", "--datasource", "gone", *flags)
    assert killed.returncode == 0 and "1 unused segment(s) killed" in killed.stdout, killed.stderr
    deep = _deep(s3_server, s3_bucket)
    with closing(open_metadata_store(meta)) as store:
        left = [r.segment for r in store.segments(include_unused=True)]
    assert sorted(s.id for s in left) == sorted(ids[1:])
    assert sorted(o.location for o in deep.stored()) == sorted(deep.location_of(s) for s in left)
