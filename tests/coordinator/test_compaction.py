"""The `compact` task with a real coordinator and real task processes: hourly segments become a day
of a newer version that overshadows them in one publish; the rows stay the rows (counted and summed
over the used segments' files, against the rows the test wrote); a task killed at its publish
publishes nothing; a segment appended while a compaction runs is kept (upgraded into the compacted
version, its file shared, and spared by kill); bad specs are Druid's 400s."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import httpx
import pyarrow.parquet as pq
import pytest

from harness.processes import StrataProcess, running
from strata.storage import open_metadata_store
from tests.coordinator.kit import (
    TASKS,
    coordinator,
    rows_spec,
    submit,
    wait_for,
    wait_publishing,
    write_rows,
)
from tests.coordinator.test_task_faults import day_rows, gone, held_pid, oracle, used_totals

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

D1, D2, D3 = "2020-01-01", "2020-01-02", "2020-01-03"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[StrataProcess, Path]]:
    root = tmp_path_factory.mktemp("compaction")
    node = coordinator(root, str(root / "meta.db"), "--task-slots", "3", hold=root / "hold")
    with running([node]):
        node.start()
        yield node, root


def compact_body(ds: str, interval: str, **extra: Any) -> dict[str, Any]:
    return {"type": "compact", "dataSource": ds,
            "ioConfig": {"type": "compact", "inputSpec": {"type": "interval", "interval": interval}}, **extra}  # fmt: skip


def used(meta: Path, ds: str) -> list[Any]:
    with closing(open_metadata_store(str(meta))) as store:
        return sorted(store.used_segments(ds), key=lambda s: (s.interval.start, s.partition_num))


def clear_markers(hold: Path) -> None:
    """Every publish leaves a `publishing-<pid>` marker: start from none, so the ones found are this test's."""
    for m in [*hold.glob("publishing-*"), *hold.glob("release-*")]:
        m.unlink()


def ingest_hours(node: StrataProcess, root: Path, ds: str, rows: list[dict[str, Any]], **kw: Any) -> None:
    path = write_rows(root / f"{ds}-{len(rows)}-{time.monotonic_ns()}.json", rows)
    task = submit(node, rows_spec(ds, path, granularity="hour", **kw))
    assert wait_for(node, task, "SUCCESS")["errorMsg"] is None


def test_hourly_segments_become_one_day_that_overshadows_them(cluster: tuple[StrataProcess, Path]) -> None:
    node, root = cluster
    meta = root / "meta.db"
    rows = day_rows(D1, 48) + day_rows(D2, 10, offset=100)
    ingest_hours(node, root, "hours", rows)
    before = used(meta, "hours")
    assert len(before) == 24 + 10
    task = submit(node, compact_body("hours", f"{D1}/{D2}", granularitySpec={"segmentGranularity": "day"}))
    done = wait_for(node, task, "SUCCESS")
    assert done["type"] == "compact" and done["dataSource"] == "hours"
    after = used(meta, "hours")
    day = [s for s in after if str(s.interval) == f"{D1}T00:00:00.000Z/{D2}T00:00:00.000Z"]
    assert len(day) == 1 and day[0].version > max(s.version for s in before)
    assert [s for s in after if s not in day] == [
        s for s in before if s.interval.start >= day[0].interval.end
    ]
    state = day[0].extra["lastCompactionState"]
    assert state["granularitySpec"]["segmentGranularity"] == "DAY"
    assert state["partitionsSpec"] == {
        "type": "dynamic",
        "maxRowsPerSegment": 5_000_000,
        "maxTotalRows": None,
    }
    assert used_totals(str(meta), "hours") == oracle(rows)  # the same rows, counted and summed
    with closing(open_metadata_store(str(meta))) as store:
        records = {r.segment.id: r.used for r in store.segments("hours", include_unused=True)}
    assert [records[s.id] for s in before if s.interval.start < day[0].interval.end] == [False] * 24
    report = httpx.get(f"{node.url}{TASKS}/task/{task}/reports", timeout=30).json()
    payload = report["ingestionStatsAndErrors"]["payload"]
    assert (
        payload["ingestionState"] == "COMPLETED" and payload["rowStats"]["buildSegments"]["processed"] == 48
    )
    assert len(payload["compaction"]["inputSegments"]) == 24


def test_rolled_up_metrics_are_combined_not_recounted(cluster: tuple[StrataProcess, Path]) -> None:
    """A `count` of rolled-up rows is summed when they roll up again (Druid's combining factory)."""
    node, root = cluster
    rows: list[dict[str, Any]] = [
        {"ts": f"{D1}T{h:02d}:{m:02d}:00Z", "k": f"v{m % 2}", "n": h * 60 + m}
        for h in range(6)
        for m in range(0, 60, 7)
    ]
    spec = rows_spec("rolled", write_rows(root / "rolled.json", rows), granularity="hour")
    schema = spec["spec"]["dataSchema"]
    schema["dimensionsSpec"] = {"dimensions": ["k"]}
    schema["metricsSpec"] = [
        {"type": "count", "name": "cnt"},
        {"type": "longSum", "name": "n", "fieldName": "n"},
    ]
    schema["granularitySpec"] |= {"queryGranularity": "hour", "rollup": True}
    assert wait_for(node, submit(node, spec), "SUCCESS")["errorMsg"] is None
    task = submit(node, compact_body("rolled", f"{D1}/{D2}", granularitySpec={"segmentGranularity": "day"}))
    wait_for(node, task, "SUCCESS")
    (day,) = used(root / "meta.db", "rolled")
    table = pq.read_table(day.load_spec["path"])
    expected: dict[tuple[int, str], tuple[int, int]] = {}
    for r in rows:  # the oracle: one row per (hour, k) with the events counted and n summed
        key = (int(r["ts"][11:13]), r["k"])
        cnt, total = expected.get(key, (0, 0))
        expected[key] = (cnt + 1, total + r["n"])
    got = {(int(t.hour), k): (c, n) for t, k, c, n in zip(table.column("__time").to_pylist(), table.column("k").to_pylist(),
                                                            table.column("cnt").to_pylist(), table.column("n").to_pylist(), strict=True)}  # fmt: skip
    assert got == expected
    assert day.extra["lastCompactionState"]["metricsSpec"] == [
        {"type": "longSum", "name": "cnt", "fieldName": "cnt"},
        {"type": "longSum", "name": "n", "fieldName": "n"},
    ]


def test_a_compact_task_killed_at_its_publish_publishes_nothing(cluster: tuple[StrataProcess, Path]) -> None:
    node, root = cluster
    hold, meta = root / "hold", root / "meta.db"
    rows = day_rows(D1, 30)
    ingest_hours(node, root, "killed", rows)
    before = used(meta, "killed")
    clear_markers(hold)
    (hold / "hold").touch()
    try:
        task = submit(
            node, compact_body("killed", f"{D1}/{D2}", granularitySpec={"segmentGranularity": "day"})
        )
        (marker,) = wait_publishing(hold, 1)
        pid = held_pid(marker)
        os.kill(pid, signal.SIGKILL)
        failed = wait_for(node, task, "FAILED")
        assert gone(pid)
        assert "killed by SIGKILL" in failed["errorMsg"] and "nothing was published" in failed["errorMsg"]
    finally:
        (hold / "hold").unlink(missing_ok=True)
    time.sleep(1.0)  # a process that survived would publish now
    assert used(meta, "killed") == before
    assert used_totals(str(meta), "killed") == oracle(rows)


def test_an_append_landing_during_a_compaction_is_kept(cluster: tuple[StrataProcess, Path]) -> None:
    """Druid's concurrent append and replace: the compaction (REPLACE lock) is held at its publish
    while an append (APPEND lock) publishes into an hour of its day; the compaction then publishes
    the day and upgrades the appended segment into it, so both the compacted and the appended rows
    are visible, and killing the appended original (now unused) keeps the file its copy reads."""
    node, root = cluster
    hold, meta = root / "hold", root / "meta.db"
    base, late = day_rows(D1, 24), day_rows(D1, 5, offset=7000, first_hour=20)
    ingest_hours(node, root, "appended", base)
    concurrent = {"useConcurrentLocks": True}
    clear_markers(hold)
    (hold / "hold").touch()
    try:
        task = submit(node, compact_body("appended", f"{D1}/{D2}", granularitySpec={"segmentGranularity": "day"},
                                         context=concurrent))  # fmt: skip
        (compaction,) = wait_publishing(hold, 1)
        path = write_rows(root / "late.json", late)
        append = submit(
            node,
            rows_spec(
                "appended",
                path,
                granularity="hour",
                append=True,
                context=concurrent,
                intervals=[f"{D1}/{D2}"],
            ),
        )
        markers = wait_publishing(hold, 2)
        (hold / f"release-{held_pid(next(m for m in markers if m != compaction))}").touch()
        assert wait_for(node, append, "SUCCESS")["errorMsg"] is None
    finally:
        (hold / "hold").unlink(missing_ok=True)
    done = wait_for(node, task, "SUCCESS")
    assert done["errorMsg"] is None
    after = used(meta, "appended")
    assert {str(s.interval) for s in after} == {f"{D1}T00:00:00.000Z/{D2}T00:00:00.000Z"}
    upgraded = [s for s in after if "upgradedFromSegmentId" in s.extra]
    late_hours = {r["ts"][:13] for r in late}
    assert [s.partition_num for s in upgraded] == list(
        range(1, len(late_hours) + 1)
    )  # after the compacted one
    assert {s.shard_spec.partitions for s in upgraded} == {1}  # the core set stays the compacted partition
    assert used_totals(str(meta), "appended") == oracle(base + late)
    report = httpx.get(f"{node.url}{TASKS}/task/{task}/reports", timeout=30).json()
    assert report["ingestionStatsAndErrors"]["payload"]["compaction"]["upgradedSegments"] == [
        s.id for s in upgraded
    ]
    kill = submit(node, {"type": "kill", "dataSource": "appended", "interval": f"{D1}/{D2}"})
    assert wait_for(node, kill, "SUCCESS")["errorMsg"] is None
    assert all(Path(s.load_spec["path"]).is_file() for s in upgraded)  # the copies' files outlived the kill
    assert used_totals(str(meta), "appended") == oracle(base + late)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            compact_body("x", f"{D1}T06:00:00Z/{D2}", granularitySpec={"segmentGranularity": "day"}),
            "not aligned",
        ),
        (
            compact_body(
                "x", f"{D1}/{D2}", ioConfig={"type": "compact", "inputSpec": {"type": "everything"}}
            ),
            "not supported",
        ),
        ({"type": "compact", "dataSource": "x"}, "ioConfig"),
        (
            compact_body(
                "x",
                f"{D1}/{D2}",
                transformSpec={"filter": {"type": "selector", "dimension": "k", "value": "a"}},
            ),
            "transformSpec",
        ),
        (compact_body("x", f"{D1}/{D1}"), "empty"),
    ],
)
def test_compact_tasks_strata_cannot_run_are_refused(
    cluster: tuple[StrataProcess, Path], body: dict, message: str
) -> None:
    node, _ = cluster
    resp = httpx.post(f"{node.url}{TASKS}/task", json=body, timeout=30)
    assert resp.status_code == 400 and message in resp.json()["errorMessage"], resp.text


def test_compacting_an_interval_with_no_segments_fails_as_druids_does(
    cluster: tuple[StrataProcess, Path],
) -> None:
    node, _ = cluster
    task = submit(node, compact_body("nothing_here", f"{D1}/{D2}"))
    assert "There is no segment to compact" in wait_for(node, task, "FAILED")["errorMsg"]


V1 = "/druid/coordinator/v1"


def test_the_auto_compaction_config_api_is_druids(cluster: tuple[StrataProcess, Path]) -> None:
    node, _ = cluster
    url = f"{node.url}{V1}/config/compaction"
    headers = {"X-Druid-Author": "ops", "X-Druid-Comment": "hourly to daily"}
    resp = httpx.post(url, json={"dataSource": "cfg", "granularitySpec": {"segmentGranularity": "DAY"}},
                      headers=headers, timeout=30)  # fmt: skip
    assert resp.status_code == 200 and resp.content == b""
    one = httpx.get(f"{url}/cfg", timeout=30).json()
    assert one["dataSource"] == "cfg" and one["taskPriority"] == 25 and one["skipOffsetFromLatest"] == "P1D"
    assert one["inputSegmentSizeBytes"] == 100_000_000_000_000 and one["granularitySpec"] == {
        "segmentGranularity": "DAY"
    }
    assert (
        httpx.post(url, json={"dataSource": "cfg", "skipOffsetFromLatest": "PT1H"}, timeout=30).status_code
        == 200
    )
    every = httpx.get(url, timeout=30).json()
    assert [c["skipOffsetFromLatest"] for c in every["compactionConfigs"] if c["dataSource"] == "cfg"] == [
        "PT1H"
    ]
    assert every["compactionTaskSlotRatio"] == 0.1 and every["maxCompactionTaskSlots"] == 2147483647
    bad = httpx.post(url, json={"dataSource": "cfg", "skipOffsetFromLatest": "soon"}, timeout=30)
    assert bad.status_code == 400 and "skipOffsetFromLatest" in bad.json()["error"]
    hist = httpx.get(f"{url}/cfg/history", timeout=30).json()
    assert [h["compactionConfig"]["skipOffsetFromLatest"] for h in hist] == ["P1D", "PT1H"]
    assert hist[0]["auditInfo"]["author"] == "ops" and hist[0]["auditInfo"]["comment"] == "hourly to daily"
    assert hist[0]["globalConfig"] == {"compactionTaskSlotRatio": 0.1, "maxCompactionTaskSlots": 2147483647,
                                       "useAutoScaleSlots": False}  # fmt: skip
    assert httpx.post(f"{url}/taskslots?ratio=0.5&max=3", timeout=30).status_code == 200
    assert httpx.get(url, timeout=30).json()["maxCompactionTaskSlots"] == 3
    assert httpx.delete(f"{url}/cfg", timeout=30).status_code == 200
    missing = httpx.delete(f"{url}/cfg", timeout=30)
    assert missing.status_code == 404 and missing.content == b""
    assert httpx.get(f"{url}/cfg", timeout=30).status_code == 404
    unknown = httpx.get(f"{node.url}{V1}/compaction/progress?dataSource=cfg", timeout=30)
    assert unknown.status_code == 404 and unknown.json() == {"error": "unknown dataSource"}


def test_auto_compaction_compacts_the_hourly_days_but_the_latest(cluster: tuple[StrataProcess, Path]) -> None:
    node, root = cluster
    meta = root / "meta.db"
    rows = day_rows(D1, 30) + day_rows(D2, 30, offset=100) + day_rows(D3, 24, offset=200)
    ingest_hours(node, root, "auto", rows)
    assert len(used(meta, "auto")) == 3 * 24
    config = {"dataSource": "auto", "granularitySpec": {"segmentGranularity": "DAY"}}
    assert httpx.post(f"{node.url}{V1}/config/compaction", json=config, timeout=30).status_code == 200
    # one compaction slot (10% of 3 task slots, at least one): a day per run, the newest first
    intervals = []
    for _ in range(2):
        assert httpx.post(f"{node.url}{V1}/compaction/compact", timeout=60).status_code == 200
        tasks = httpx.get(f"{node.url}{TASKS}/tasks?datasource=auto&type=compact", timeout=30).json()
        (task,) = [t for t in tasks if t["statusCode"] == "RUNNING"]
        assert task["id"].startswith("coordinator-issued_compact_auto_")
        payload = httpx.get(f"{node.url}{TASKS}/task/{task['id']}", timeout=30).json()["payload"]
        intervals.append(payload["ioConfig"]["inputSpec"]["interval"])
        assert wait_for(node, task["id"], "SUCCESS")["errorMsg"] is None
    assert [iv[:10] for iv in intervals] == [D2, D1]
    assert httpx.post(f"{node.url}{V1}/compaction/compact", timeout=60).status_code == 200
    (status,) = httpx.get(f"{node.url}{V1}/compaction/status?dataSource=auto", timeout=30).json()[
        "latestStatus"
    ]
    assert status["intervalCountCompacted"] == 2 and status["segmentCountCompacted"] == 2
    assert status["intervalCountSkipped"] == 1 and status["segmentCountSkipped"] == 24  # the latest day (P1D)
    assert status["intervalCountAwaitingCompaction"] == 0
    progress = httpx.get(f"{node.url}{V1}/compaction/progress?dataSource=auto", timeout=30).json()
    assert progress == {"remainingSegmentSize": 0}
    after = used(meta, "auto")
    assert (
        sum(1 for s in after if s.interval.end - s.interval.start == 24 * 3600 * 1000) == 2
        and len(after) == 26
    )
    assert used_totals(str(meta), "auto") == oracle(rows)
    # nothing left to do: a further run submits no task
    assert httpx.post(f"{node.url}{V1}/compaction/compact", timeout=60).status_code == 200
    assert len(httpx.get(f"{node.url}{TASKS}/tasks?datasource=auto&type=compact", timeout=30).json()) == 2
    httpx.delete(f"{node.url}{V1}/config/compaction/auto", timeout=30)
