"""A cluster on S3 deep storage: historicals pull from moto, answers checked against DuckDB over the
raw rows; a damaged object is never announced; a server restart mid-pull only delays loading."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import httpx
import pytest

from harness.processes import StrataProcess, running
from harness.s3_server import S3Server
from strata.ingestion.api import ingest
from strata.storage import open_deep_storage, open_metadata_store
from tests.cluster.cluster_kit import (
    SYNTHETIC,
    WIKIPEDIA,
    assert_answers_eventually,
    served_ids,
    synthetic_spec,
    wait_settled,
    wait_until,
    write_rows,
)
from timeline import DataSegment

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module")
def s3_cluster(
    tmp_path_factory: pytest.TempPathFactory, s3_server: S3Server, zk_hosts: str,
    wikipedia_sample: Path, wikipedia_index_spec: Path,
) -> Iterator[dict[str, Any]]:  # fmt: skip
    """The Wikipedia sample ingested (local engine, hourly) into S3; two historicals and a broker."""
    root = tmp_path_factory.mktemp("s3cluster")
    bucket = f"cluster-{uuid.uuid4().hex[:8]}"
    s3_server.create_bucket(bucket)
    url, meta = f"s3://{bucket}/druid/segments", root / "meta.db"
    spec = json.loads(wikipedia_index_spec.read_text())
    spec["spec"]["ioConfig"]["inputSource"]["baseDir"] = str(wikipedia_sample.parent)
    spec["spec"]["dataSchema"]["granularitySpec"]["segmentGranularity"] = "hour"
    summary = ingest(spec, deep_storage=url, metadata=meta, s3_endpoint=s3_server.endpoint, engine="local")
    assert {w.segment.load_spec["type"] for w in summary.segments} == {"s3"}
    base = f"/strata-s3-{uuid.uuid4().hex[:8]}"
    common = ["--zk", zk_hosts, "--zk-base", base, "--deep-storage", url, "--s3-endpoint", s3_server.endpoint,
              "--metadata", str(meta), "--replicas", "1", "--poll-period", "1"]  # fmt: skip
    historicals = [StrataProcess("historical", [*common, "--segment-cache", str(root / f"cache{i}")],
                                 root / f"hist{i}.log") for i in range(2)]  # fmt: skip
    broker = StrataProcess("broker", ["--zk", zk_hosts, "--zk-base", base], root / "broker.log")
    with running([*historicals, broker]):
        for h in historicals:
            h.start()
        broker.start()
        wait_settled(broker, meta, historicals)
        yield {"broker": broker, "historicals": historicals, "root": root, "url": url, "meta": meta}


def _side_ingest(
    cluster: dict[str, Any], s3: S3Server, name: str, hours: int
) -> tuple[list[DataSegment], Path]:
    """Rows pushed to the cluster's bucket and published in a side store only: the test decides when
    (and in what state) the cluster's metadata store names them."""
    root: Path = cluster["root"] / name
    rows = write_rows(root / "rows.json", [
        {"ts": f"2021-03-04T{h:02d}:{m:02d}:00Z", "k": f"k{(h * m) % 5}", "n": h * 100 + m}
        for h in range(hours) for m in range(0, 60, 7)
    ])  # fmt: skip
    summary = ingest(synthetic_spec(name, rows, "hour"), deep_storage=cluster["url"], metadata=root / "side.db",
                     s3_endpoint=s3.endpoint, engine="local")  # fmt: skip
    return [w.segment for w in summary.segments], rows


def _publish(cluster: dict[str, Any], segments: list[DataSegment]) -> None:
    with closing(open_metadata_store(cluster["meta"])) as store:
        store.publish(segments, overwrite=False)


def _status(node: StrataProcess) -> dict[str, Any]:
    body = httpx.get(f"{node.url}/status", timeout=10).json()
    return dict(body.get("strata", body))


def test_queries_over_segments_pulled_from_s3(s3_cluster: dict[str, Any], wikipedia_sample: Path) -> None:
    broker = s3_cluster["broker"]
    assert_answers_eventually(broker, "wikipedia", "2015-09-12/2015-09-13", wikipedia_sample, WIKIPEDIA)


def test_a_damaged_object_is_never_announced(s3_cluster: dict[str, Any], s3_server: S3Server) -> None:
    segments, _ = _side_ingest(s3_cluster, s3_server, "damaged", 2)
    bad, good = segments
    deep = open_deep_storage(s3_cluster["url"], s3_endpoint=s3_server.endpoint)
    fs = s3_server.filesystem()
    with fs.open_input_stream(deep.location_of(bad)) as f:
        data = bytearray(f.read())
    data[len(data) // 3] ^= 0x55  # same size: only the checksum can tell
    with fs.open_output_stream(deep.location_of(bad)) as out:
        out.write(bytes(data))
    _publish(s3_cluster, segments)
    nodes: list[StrataProcess] = s3_cluster["historicals"]

    def reported() -> bool:
        failures = [f for n in nodes for f in _status(n).get("loadFailures", [])]
        return any(f["segment"] == bad.id and "SHA-256" in f["error"] for f in failures)

    wait_until(reported, f"a historical to report {bad.id} as unverifiable in /status", 60, nodes)
    wait_until(lambda: any(good.id in served_ids(n) for n in nodes), "the intact segment to load", 60, nodes)
    assert all(bad.id not in served_ids(n) for n in nodes)
    assert any(bad.id in n.log_text() and "SHA-256" in n.log_text() for n in nodes)
    with closing(open_metadata_store(s3_cluster["meta"])) as store:  # leave the cluster as it was
        store.mark_unused([s.id for s in segments])


def test_a_server_restart_while_historicals_pull_only_delays_loading(
    s3_cluster: dict[str, Any], s3_server: S3Server
) -> None:
    segments, rows = _side_ingest(s3_cluster, s3_server, "restarted", 4)
    nodes: list[StrataProcess] = s3_cluster["historicals"]
    # published while the server is down: the historicals' first pulls fail and are retried
    s3_server.restart(down_s=2.0, while_down=lambda: _publish(s3_cluster, segments))
    wait_settled(s3_cluster["broker"], s3_cluster["meta"], nodes, timeout=120)
    assert_answers_eventually(s3_cluster["broker"], "restarted", "2021-03-04/2021-03-05", rows, SYNTHETIC)
    assert not any(
        f["segment"] in {s.id for s in segments} for n in nodes for f in _status(n)["loadFailures"]
    )
