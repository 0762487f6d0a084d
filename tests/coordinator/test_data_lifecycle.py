"""The data lifecycle on a real cluster (ZooKeeper, two historicals, a broker, a coordinator found by
the broker in ZooKeeper): data ingested by a task; segments marked unused and used again by
interval, ids and whole data source; unused segments killed. After each step the broker's answers
must equal an oracle over the raw rows of exactly the days that should be visible, and the
coordinator's listings must name what the metadata store holds."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import httpx
import pytest

from harness.processes import running
from strata.storage import open_metadata_store
from tests.cluster.cluster_kit import Nodes, cluster, wait_until
from tests.coordinator.kit import coordinator, rows_spec, submit, wait_for, write_rows

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

DS = "lc"
DAYS = ["2020-01-01", "2020-01-02", "2020-01-03"]
ROWS = [
    {"ts": f"{d}T{h:02d}:30:00Z", "k": f"v{h % 5}", "n": i * 100 + h}
    for i, d in enumerate(DAYS)
    for h in range(24)
]
V1 = "/druid/coordinator/v1"


def oracle(rows: list[dict[str, Any]], days: set[str]) -> list[dict[str, Any]]:
    """Per day: rows and SUM(n), over the raw rows of the visible days (plain Python)."""
    out = []
    for day in sorted(days):
        mine = [r for r in rows if r["ts"].startswith(day)]
        if mine:
            out.append(
                {
                    "timestamp": f"{day}T00:00:00.000Z",
                    "result": {"c": len(mine), "s": sum(r["n"] for r in mine)},
                }
            )
    return out


QUERY = {
    "queryType": "timeseries", "dataSource": DS, "intervals": ["2020-01-01/2020-01-10"], "granularity": "day",
    "aggregations": [{"type": "count", "name": "c"}, {"type": "longSum", "name": "s", "fieldName": "n"}],
    "context": {"skipEmptyBuckets": True, "useCache": False, "populateCache": False},
}  # fmt: skip


@pytest.fixture(scope="module")
def scene(tmp_path_factory: pytest.TempPathFactory, zk_hosts: str) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("lifecycle")
    base = f"/lifecycle-{uuid.uuid4().hex[:8]}"
    boss = coordinator(root, str(root / "meta.db"), "--zk", zk_hosts, "--zk-base", base)
    with running([boss]), cluster(root, zk_hosts, base) as nodes:
        boss.start()
        task_id = submit(
            nodes.broker.url, rows_spec(DS, write_rows(root / "rows.json", ROWS))
        )  # through the broker
        assert wait_for(boss, task_id, "SUCCESS")["errorMsg"] is None
        yield {"root": root, "nodes": nodes, "coordinator": boss}


def broker_answers(nodes: Nodes, days: set[str], rows: list[dict[str, Any]] = ROWS) -> None:
    want = oracle(rows, days)
    got: list[Any] = []

    def same() -> bool:
        nonlocal got
        resp = httpx.post(f"{nodes.broker.url}/druid/v2/", json=QUERY, timeout=30)
        got = resp.json() if resp.status_code == 200 else [resp.status_code, resp.text]
        return got == want

    wait_until(same, f"the broker to answer for days {sorted(days)} (last answer {got})", 60, nodes.all)


def call(nodes: Nodes, method: str, path: str, body: Any = None) -> httpx.Response:
    """The coordinator's API through the broker, which relays it (found in ZooKeeper)."""
    return httpx.request(method, f"{nodes.broker.url}{V1}{path}", json=body, timeout=30)


def ids_by_day(root: Path) -> dict[str, str]:
    with closing(open_metadata_store(str(root / "meta.db"))) as store:
        records = store.segments(DS, include_unused=True)
    newest: dict[str, Any] = {}
    for r in records:
        day = r.segment.id.split("_")[1][:10]
        if day not in newest or r.segment.version > newest[day].version:
            newest[day] = r.segment
    return {day: s.id for day, s in newest.items()}


def test_marking_unused_and_used_changes_the_broker_s_answers(scene: dict[str, Any]) -> None:
    nodes, ids = scene["nodes"], ids_by_day(scene["root"])
    broker_answers(nodes, set(DAYS))
    assert call(nodes, "POST", f"/datasources/{DS}/markUnused",
                {"interval": "2020-01-02/2020-01-03"}).json() == {"numChangedSegments": 1}  # fmt: skip
    broker_answers(nodes, {DAYS[0], DAYS[2]})
    assert call(nodes, "POST", f"/datasources/{DS}/markUsed", {"segmentIds": [ids[DAYS[1]]]}).json() == {
        "numChangedSegments": 1}  # fmt: skip
    broker_answers(nodes, set(DAYS))
    assert call(nodes, "DELETE", f"/datasources/{DS}/segments/{ids[DAYS[0]]}").json() == {
        "segmentStateChanged": True
    }
    assert call(nodes, "DELETE", f"/datasources/{DS}/segments/{ids[DAYS[0]]}").json() == {
        "segmentStateChanged": False
    }
    broker_answers(nodes, {DAYS[1], DAYS[2]})
    assert call(nodes, "POST", f"/datasources/{DS}/segments/{ids[DAYS[0]]}").json() == {
        "segmentStateChanged": True
    }
    assert call(nodes, "DELETE", f"/datasources/{DS}").json() == {"numChangedSegments": 3}
    broker_answers(nodes, set())
    assert call(nodes, "GET", f"/datasources/{DS}").status_code == 204  # nothing used: Druid's "not found"
    assert call(nodes, "POST", f"/datasources/{DS}").json() == {"numChangedSegments": 3}
    broker_answers(nodes, set(DAYS))


def test_the_coordinator_lists_what_the_metadata_store_holds(scene: dict[str, Any]) -> None:
    nodes, root = scene["nodes"], scene["root"]
    broker_answers(nodes, set(DAYS))
    with closing(open_metadata_store(str(root / "meta.db"))) as store:
        used = sorted(store.used_segments(DS), key=lambda s: s.interval.start)
    assert call(nodes, "GET", "/datasources").json() == [DS]
    simple = call(nodes, "GET", "/datasources?simple").json()
    assert simple == [{"name": DS, "properties": {"tiers": {}, "segments": {
        "count": 3, "size": sum(s.size for s in used), "minTime": "2020-01-01T00:00:00.000Z",
        "maxTime": "2020-01-04T00:00:00.000Z"}}}]  # fmt: skip
    assert call(nodes, "GET", f"/datasources/{DS}/intervals").json() == [
        str(s.interval) for s in reversed(used)
    ]
    assert call(nodes, "GET", f"/datasources/{DS}/segments").json() == [s.id for s in used]
    assert call(nodes, "GET", f"/datasources/{DS}/segments?full").json() == [s.to_json() for s in used]
    full = call(nodes, "GET", f"/datasources/{DS}/intervals?full").json()
    served = full[str(used[0].interval)][used[0].id]["servers"]
    assert len(served) == 1 and served[0] in {n.address for n in nodes.historicals}  # from ZooKeeper
    assert call(nodes, "GET", f"/metadata/datasources/{DS}/segments").json() == [s.id for s in used]
    assert call(nodes, "GET", f"/metadata/datasources/{DS}").json()["segments"] == [s.to_json() for s in used]
    assert call(nodes, "GET", "/metadata/datasources/nope").status_code == 404
    assert call(nodes, "POST", f"/datasources/{DS}/markUnused", {}).status_code == 400
    assert call(nodes, "POST", "/datasources/nope/markUnused", {"interval": "2020/2021"}).status_code == 204


def test_kill_removes_only_unused_segments_and_overshadowed_ones_stay_unused(scene: dict[str, Any]) -> None:
    nodes, root, boss = scene["nodes"], scene["root"], scene["coordinator"]
    broker_answers(nodes, set(DAYS))
    ids = ids_by_day(root)
    call(nodes, "POST", f"/datasources/{DS}/markUnused", {"segmentIds": [ids[DAYS[0]], ids[DAYS[2]]]})
    broker_answers(nodes, {DAYS[1]})
    resp = call(nodes, "DELETE", f"/datasources/{DS}/intervals/2020-01-01_2020-01-10")
    assert resp.status_code == 200
    kill = httpx.get(
        f"{boss.url}/druid/indexer/v1/tasks", params={"type": "kill", "datasource": DS}, timeout=30
    )
    assert wait_for(boss, kill.json()[0]["id"], "SUCCESS")["errorMsg"] is None
    with closing(open_metadata_store(str(root / "meta.db"))) as store:
        left = store.segments(DS, include_unused=True)
    assert [(r.segment.id, r.used) for r in left] == [(ids[DAYS[1]], True)]
    files = {str(p.parent) for p in (root / "deep" / DS).glob("*/*/*/index.parquet")}
    assert len(files) == 1 and all(ids[d] not in str(files) for d in (DAYS[0], DAYS[2]))
    broker_answers(nodes, {DAYS[1]})
    # a new version of day 2 overshadows the old one, which marking used leaves unused
    newer = [{"ts": f"{DAYS[1]}T05:00:00Z", "k": "z", "n": 7}]
    task_id = submit(
        boss, rows_spec(DS, write_rows(root / "newer.json", newer), intervals=[f"{DAYS[1]}/{DAYS[2]}"])
    )
    assert wait_for(boss, task_id, "SUCCESS")["errorMsg"] is None
    broker_answers(nodes, {DAYS[1]}, newer)
    assert call(nodes, "POST", f"/datasources/{DS}/markUsed", {"interval": "2020-01-01/2020-01-10"}).json() == {
        "numChangedSegments": 0}  # fmt: skip
    time.sleep(2.0)  # a wrongly restored old version would be served by now
    broker_answers(nodes, {DAYS[1]}, newer)
