"""The real-time node hands off through S3: its final segments are pushed to the bucket, published,
pulled by a historical (checksum checked) and dropped by the real-time node; answers never change."""

from __future__ import annotations

import uuid
from contextlib import closing
from pathlib import Path

import httpx
import pytest

from harness.processes import StrataProcess, running
from harness.s3_server import S3Server
from strata.storage import open_deep_storage, open_metadata_store
from tests.cluster.cluster_kit import served_ids, wait_until
from tests.realtime.rt_kit import DS, events, hourly, hourly_answer, push, write_spec

pytestmark = pytest.mark.timeout(240)


def test_handoff_through_s3(tmp_path: Path, s3_server: S3Server, s3_bucket: str, zk_hosts: str) -> None:
    url, meta, base = (
        f"s3://{s3_bucket}/rt",
        str(tmp_path / "meta.db"),
        f"/strata-s3rt-{uuid.uuid4().hex[:8]}",
    )
    shared = ["--zk", zk_hosts, "--zk-base", base, "--deep-storage", url, "--s3-endpoint", s3_server.endpoint,
              "--metadata", meta]  # fmt: skip
    rt = StrataProcess("realtime", ["--spec", str(write_spec(tmp_path)), "--base-dir", str(tmp_path / "rt-base"),
                                    "--drop-delay", "1", *shared], tmp_path / "rt.log")  # fmt: skip
    historical = StrataProcess("historical", [*shared, "--segment-cache", str(tmp_path / "cache"), "--replicas", "1",
                                              "--poll-period", "1"], tmp_path / "hist.log")  # fmt: skip
    with running([rt, historical]):
        rt.start()
        historical.start()
        live = events(500)
        assert push(rt, live, "feed", 1).status_code == 200
        want = hourly(live)
        assert hourly_answer(rt) == want
        live_ids = served_ids(rt)
        resp = httpx.post(f"{rt.url}/v1/push/{DS}/handoff", timeout=10)
        assert resp.status_code == 200 and set(resp.json()["handingOff"]) == live_ids
        wait_until(lambda: not served_ids(rt) and live_ids <= served_ids(historical),
                   "the historical to take over the live segments from S3", timeout=120, logs=[rt, historical])  # fmt: skip
        assert hourly_answer(historical) == want
    with closing(open_metadata_store(meta)) as store:
        used = store.used_segments(DS)
    assert {s.id for s in used} == live_ids and {s.load_spec["type"] for s in used} == {"s3"}
    deep = open_deep_storage(url, s3_endpoint=s3_server.endpoint)
    assert sorted(o.location for o in deep.stored()) == sorted(deep.location_of(s) for s in used)
