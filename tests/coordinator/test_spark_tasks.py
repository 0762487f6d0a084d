"""Tasks on Spark (`strata coordinator --engine spark`): an index task's rows are built by a Spark job
in the task's own process (local[2] here, a cluster's master in production), and a shutdown stops
that process with its JVM, publishing nothing. Answers against the raw rows."""

from __future__ import annotations

import os
import time
from contextlib import closing
from pathlib import Path
from typing import Any

import httpx
import pyarrow.parquet as pq
import pytest

from harness.processes import StrataProcess, running
from strata.storage import open_metadata_store
from tests.coordinator.kit import TASKS, coordinator, rows_spec, submit, wait_for, wait_publishing, write_rows
from tests.spark_kit import SPARK_CONF

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

ROWS: list[dict[str, Any]] = [
    {"ts": f"2020-03-0{1 + h % 3}T{h % 24:02d}:00:00Z", "k": f"v{h % 7}", "n": h} for h in range(300)
]


def spark_coordinator(tmp_path: Path, meta: str, hold: Path | None = None) -> StrataProcess:
    conf = [arg for key, value in SPARK_CONF.items() for arg in ("--spark-conf", f"{key}={value}")]
    node = coordinator(tmp_path, meta, "--engine", "spark", "--spark-master", "local[2]", *conf, hold=hold)
    node.env |= {"PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", ""), "SPARK_LOCAL_IP": "127.0.0.1"}
    if not node.env["PYSPARK_PYTHON"]:
        del node.env["PYSPARK_PYTHON"]
    return node


def java_children(pid: int) -> list[int]:
    """Processes of the task's own process group running java (its Spark JVM)."""
    out = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            stat = (proc / "stat").read_text().rsplit(")", 1)[-1].split()
            cmd = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if int(stat[2]) == pid and b"java" in cmd:
            out.append(int(proc.name))
    return out


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
    except OSError:
        return False
    return state != "Z"  # a zombie is dead, only not yet reaped


def test_an_index_task_runs_on_spark(tmp_path: Path) -> None:
    meta = str(tmp_path / "meta.db")
    node = spark_coordinator(tmp_path, meta)
    with running([node]):
        node.start()
        task_id = submit(node, rows_spec("sparked", write_rows(tmp_path / "rows.json", ROWS)))
        done = wait_for(node, task_id, "SUCCESS", "FAILED", timeout=240)
        assert done["statusCode"] == "SUCCESS", httpx.get(f"{node.url}{TASKS}/task/{task_id}/log").text[
            -3000:
        ]
        report = httpx.get(f"{node.url}{TASKS}/task/{task_id}/reports", timeout=30).json()
        assert report["ingestionStatsAndErrors"]["payload"]["rowStats"]["buildSegments"]["processed"] == len(
            ROWS
        )
    with closing(open_metadata_store(meta)) as store:
        tables = [pq.read_table(s.load_spec["path"]) for s in store.used_segments("sparked")]
    assert len(tables) == 3  # a day segment per day of rows
    assert sum(t.num_rows for t in tables) == len(ROWS)
    assert sum(int(t.column("n").to_numpy().sum()) for t in tables) == sum(r["n"] for r in ROWS)


def test_a_spark_task_shut_down_mid_flight_stops_its_jvm_and_publishes_nothing(tmp_path: Path) -> None:
    meta, hold = str(tmp_path / "meta.db"), tmp_path / "hold"
    node = spark_coordinator(tmp_path, meta, hold=hold)
    (hold / "hold").touch()
    with running([node]):
        node.start()
        task_id = submit(node, rows_spec("sparked", write_rows(tmp_path / "rows.json", ROWS)))
        pid = int(wait_publishing(hold, 1, timeout=240)[0].name.split("-", 1)[1])
        jvms = java_children(pid)
        assert jvms, "the task's Spark JVM runs in its process group"
        resp = httpx.post(f"{node.url}{TASKS}/task/{task_id}/shutdown", timeout=30)
        assert resp.status_code == 200
        assert wait_for(node, task_id, "FAILED")["errorMsg"] == "Shutdown request from user"
        deadline = time.monotonic() + 60
        while any(alive(p) for p in [pid, *jvms]):
            assert time.monotonic() < deadline, "the task's process or its JVM outlived the shutdown"
            time.sleep(0.2)
        (hold / "hold").unlink()
    with closing(open_metadata_store(meta)) as store:
        assert store.segments("sparked", include_unused=True) == []


def test_a_compact_task_runs_on_spark(tmp_path: Path) -> None:
    """Hourly segments (ingested by the local engine) compacted into days by a Spark job: the same
    rows, one segment per day, partitioned as the task asks."""
    meta = str(tmp_path / "meta.db")
    from strata.ingestion.api import ingest

    spec = rows_spec("sparkcompact", write_rows(tmp_path / "rows.json", ROWS), granularity="hour")
    ingest(spec, deep_storage=tmp_path / "deep", metadata=meta, engine="local")
    node = spark_coordinator(tmp_path, meta)
    with running([node]):
        node.start()
        body = {"type": "compact", "dataSource": "sparkcompact",
                "ioConfig": {"type": "compact", "inputSpec": {"type": "interval", "interval": "2020-03-01/2020-03-04"}},
                "granularitySpec": {"segmentGranularity": "day"},
                "tuningConfig": {"partitionsSpec": {"type": "dynamic", "maxRowsPerSegment": 60}}}  # fmt: skip
        task_id = submit(node, body)
        done = wait_for(node, task_id, "SUCCESS", "FAILED", timeout=240)
        assert done["statusCode"] == "SUCCESS", httpx.get(f"{node.url}{TASKS}/task/{task_id}/log").text[
            -3000:
        ]
        report = httpx.get(f"{node.url}{TASKS}/task/{task_id}/reports", timeout=30).json()
        assert report["ingestionStatsAndErrors"]["payload"]["compaction"]["engine"] == "spark"
    with closing(open_metadata_store(meta)) as store:
        segments = store.used_segments("sparkcompact")
    assert {str(s.interval)[:10] for s in segments} == {"2020-03-01", "2020-03-02", "2020-03-03"}
    assert all(s.interval.end - s.interval.start == 86_400_000 for s in segments)
    tables = [pq.read_table(s.load_spec["path"]) for s in segments]
    assert max(t.num_rows for t in tables) <= 60 and len(segments) == 6  # 100 rows a day, in twos
    assert sum(t.num_rows for t in tables) == len(ROWS)
    assert sum(int(t.column("n").to_numpy().sum()) for t in tables) == sum(r["n"] for r in ROWS)
