"""Compaction beside a real-time node, all real processes (ZooKeeper, a real-time node, a historical,
a broker, the coordinator): a compaction of a day whose latest hour is still live refuses to publish
(its rows would be hidden under the compacted version), auto-compaction skips that day while a
bucket is being built, and once the hour is handed off it compacts the real-time handoff's hourly
segments into the day; every answer along the way equals the sums over the pushed events."""

from __future__ import annotations

import uuid
from contextlib import closing
from pathlib import Path

import httpx
import pytest

from harness.processes import StrataProcess, running
from strata.storage import open_metadata_store
from strata.storage.pending_segments import PendingSegments
from tests.cluster.cluster_kit import cluster, wait_until
from tests.coordinator.kit import TASKS, coordinator, submit, wait_for
from tests.realtime.rt_kit import DS, events, hourly, hourly_answer, push, realtime, write_spec
from timeline import Interval

pytestmark = [pytest.mark.integration, pytest.mark.timeout(400)]

V1 = "/druid/coordinator/v1"
DAY = "2025-01-01/2025-01-02"
SPAN = "2025-01-01/2025-01-03"


def used_intervals(meta: Path) -> list[str]:
    with closing(open_metadata_store(str(meta))) as store:
        return sorted(str(s.interval) for s in store.used_segments(DS))


def pending_ids(meta: Path) -> list[str]:
    with closing(open_metadata_store(str(meta))) as store:
        return [s.id for s in PendingSegments(store).overlapping(DS, Interval.parse(DAY))]


def visible(broker: StrataProcess) -> list[str]:
    """The intervals of the segments the broker's timeline shows (sys.segments, not overshadowed)."""
    sql = f'SELECT "start", "end" FROM sys.segments WHERE datasource = \'{DS}\' AND is_overshadowed = 0'
    rows = httpx.post(f"{broker.url}/druid/v2/sql/", json={"query": sql}, timeout=30).json()
    return sorted({f"{r['start']}/{r['end']}" for r in rows})


def test_auto_compaction_waits_for_live_hours_then_compacts_the_handoffs(
    tmp_path: Path, zk_hosts: str
) -> None:
    base = f"/strata-rtc-{uuid.uuid4().hex[:8]}"
    meta = tmp_path / "meta.db"
    rt = realtime(tmp_path, write_spec(tmp_path), zk=zk_hosts, zk_base=base)
    coord = coordinator(tmp_path, str(meta))
    with cluster(tmp_path, zk_hosts, base, historicals=1, replicas=1) as nodes, running([rt, coord]):
        broker = nodes.broker
        rt.start()
        coord.start()
        early = events(600, hours=3)  # hours 00-02
        assert push(rt, early, "feed", 1).status_code == 200
        assert httpx.post(f"{rt.url}/v1/push/{DS}/handoff", timeout=30).status_code == 200
        wait_until(lambda: len(used_intervals(meta)) == 3 and not pending_ids(meta), "three hours handed off",
                   logs=[rt])  # fmt: skip
        # the day's last hour, and the next day's first (so the day is not the latest data's)
        live = [{**e, "ts": "2025-01-01T03" + e["ts"][13:]} for e in events(200, offset=9000, hours=1)]
        live += [{**e, "ts": "2025-01-02T00" + e["ts"][13:]} for e in events(50, offset=9500, hours=1)]
        assert push(rt, live, "feed", 2).status_code == 200
        assert len(pending_ids(meta)) == 1  # the live hour is a pending segment
        want = hourly(early + live)
        wait_until(lambda: hourly_answer(broker, SPAN) == want, "the broker over handoffs and the live hours")

        # a manual compaction of the day would hide the live hour: it publishes nothing
        manual = submit(coord, {"type": "compact", "dataSource": DS,
                                "ioConfig": {"type": "compact", "inputSpec": {"type": "interval", "interval": DAY}},
                                "granularitySpec": {"segmentGranularity": "day"}})  # fmt: skip
        failed = wait_for(coord, manual, "FAILED")
        assert "still being built" in failed["errorMsg"] and "nothing was published" in failed["errorMsg"]
        assert len(used_intervals(meta)) == 3
        assert hourly_answer(broker, SPAN) == want

        # auto-compaction skips the day while the hour is live
        config = {
            "dataSource": DS,
            "skipOffsetFromLatest": "PT0S",
            "granularitySpec": {"segmentGranularity": "DAY"},
        }
        assert httpx.post(f"{coord.url}{V1}/config/compaction", json=config, timeout=30).status_code == 200
        assert httpx.post(f"{coord.url}{V1}/compaction/compact", timeout=60).status_code == 200
        (snapshot,) = httpx.get(f"{coord.url}{V1}/compaction/status", timeout=30).json()["latestStatus"]
        assert snapshot["intervalCountSkipped"] == 1 and snapshot["intervalCountAwaitingCompaction"] == 0
        assert snapshot["segmentCountSkipped"] == 3  # the three handed-off hours, beside the live one
        compacts = httpx.get(f"{coord.url}{TASKS}/tasks?datasource={DS}&type=compact", timeout=30).json()
        assert [t["id"] for t in compacts] == [manual]

        # handed off, the day's four hourly segments are compacted into one day
        assert httpx.post(f"{rt.url}/v1/push/{DS}/handoff", timeout=30).status_code == 200
        wait_until(lambda: len(used_intervals(meta)) == 5 and not pending_ids(meta), "the last hours handed off",
                   logs=[rt])  # fmt: skip
        assert httpx.post(f"{coord.url}{V1}/compaction/compact", timeout=60).status_code == 200
        compacts = httpx.get(f"{coord.url}{TASKS}/tasks?datasource={DS}&type=compact", timeout=30).json()
        (auto,) = [t["id"] for t in compacts if t["id"] != manual]
        assert wait_for(coord, auto, "SUCCESS")["errorMsg"] is None
        day, next_hour = (
            "2025-01-01T00:00:00.000Z/2025-01-02T00:00:00.000Z",
            "2025-01-02T00:00:00.000Z/2025-01-02T01:00:00.000Z",
        )
        assert used_intervals(meta) == [day, next_hour]
        assert hourly_answer(broker, SPAN) == want
        wait_until(lambda: visible(broker) == [day, next_hour], "the broker to see the compacted day")
        assert hourly_answer(broker, SPAN) == want
        assert httpx.post(f"{coord.url}{V1}/compaction/compact", timeout=60).status_code == 200
        (snapshot,) = httpx.get(f"{coord.url}{V1}/compaction/status", timeout=30).json()["latestStatus"]
        assert snapshot["intervalCountCompacted"] == 1 and snapshot["segmentCountCompacted"] == 1
        assert snapshot["intervalCountSkipped"] == 1  # the latest data's day
