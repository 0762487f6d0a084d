"""Druid's task API on a real coordinator process: a spec posted and polled as Airflow's Druid operator
does, Druid's JSON shapes (TaskStatusPlus, the ingestionStatsAndErrors and killUnusedSegments
reports), the task lists and their filters, and Druid's answers to bad requests. Row counts are
checked against the rows the test wrote; the kill task against the files and rows it leaves."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import httpx
import pytest

from harness.processes import StrataProcess, running
from strata.storage import open_metadata_store
from tests.coordinator.kit import TASKS, coordinator, rows_spec, submit, wait_for, write_rows

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

# TaskStatusPlus as Druid serialises it (processing/.../indexer/TaskStatusPlus.java)
STATUS_PLUS_KEYS = {"id", "groupId", "type", "createdTime", "queueInsertionTime", "statusCode", "status",
                    "runnerStatusCode", "duration", "location", "dataSource", "errorMsg"}  # fmt: skip
ROWS: list[dict[str, Any]] = [
    {"ts": f"2020-01-0{1 + h // 24}T{h % 24:02d}:00:00Z", "k": f"v{h % 4}", "n": h} for h in range(40)
]


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StrataProcess]:
    root = tmp_path_factory.mktemp("coordinator")
    process = coordinator(root, str(root / "meta.db"))
    with running([process]):
        process.start()
        process.root = root  # type: ignore[attr-defined]
        yield process


def get(node: StrataProcess, path: str, **params: Any) -> httpx.Response:
    return httpx.get(f"{node.url}{path}", params=params, timeout=30)


def post(node: StrataProcess, path: str, body: Any = None, content: bytes | None = None) -> httpx.Response:
    if content is not None:
        return httpx.post(f"{node.url}{path}", content=content, timeout=30,
                          headers={"Content-Type": "application/json"})  # fmt: skip
    return httpx.post(f"{node.url}{path}", json=body, timeout=30)


@pytest.fixture(scope="module")
def ingested(node: StrataProcess) -> str:
    root: Path = node.root  # type: ignore[attr-defined]
    rows = write_rows(root / "rows.json", ROWS)
    task_id = submit(node, rows_spec("api", rows, intervals=["2020-01-01/2020-01-03"]))
    assert wait_for(node, task_id, "SUCCESS")["errorMsg"] is None
    return task_id


def test_a_spec_posted_and_polled_as_airflow_does_succeeds(node: StrataProcess, ingested: str) -> None:
    body = get(node, f"{TASKS}/task/{ingested}/status").json()
    assert body["task"] == ingested and set(body["status"]) == STATUS_PLUS_KEYS
    status = body["status"]
    assert (status["status"], status["statusCode"], status["runnerStatusCode"]) == (
        "SUCCESS",
        "SUCCESS",
        "NONE",
    )
    assert (status["type"], status["dataSource"], status["groupId"]) == ("index_parallel", "api", ingested)
    assert status["duration"] >= 0 and status["errorMsg"] is None
    assert set(status["location"]) == {"host", "port", "tlsPort"}
    payload = get(node, f"{TASKS}/task/{ingested}").json()
    assert payload["task"] == ingested and payload["payload"]["spec"]["dataSchema"]["dataSource"] == "api"


def test_the_report_counts_the_rows_read(node: StrataProcess, ingested: str) -> None:
    report = get(node, f"{TASKS}/task/{ingested}/reports").json()["ingestionStatsAndErrors"]
    assert report["type"] == "ingestionStatsAndErrors" and report["taskId"] == ingested
    payload = report["payload"]
    assert payload["ingestionState"] == "COMPLETED" and payload["errorMsg"] is None
    built = payload["rowStats"]["buildSegments"]
    assert (built["processed"], built["unparseable"], built["thrownAway"]) == (len(ROWS), 0, 0)
    assert payload["segmentsPublished"] == len({r["ts"][:10] for r in ROWS})


def test_the_log_holds_the_coordinator_s_notes_and_the_task_s_output(
    node: StrataProcess, ingested: str
) -> None:
    log = get(node, f"{TASKS}/task/{ingested}/log")
    assert log.status_code == 200 and log.headers["content-type"].startswith("text/plain")
    assert "locks granted" in log.text and "attempt 1 started" in log.text and "succeeded" in log.text
    tail = get(node, f"{TASKS}/task/{ingested}/log", offset=-20).text
    assert len(tail.encode()) == 20 and log.text.endswith(tail)


def test_task_lists_filter_as_druids_do(node: StrataProcess, ingested: str) -> None:
    root: Path = node.root  # type: ignore[attr-defined]
    other = submit(node, rows_spec("api_other", write_rows(root / "other.json", ROWS[:3])))
    wait_for(node, other, "SUCCESS")
    ids = lambda resp: [t["id"] for t in resp.json()]  # noqa: E731
    assert ids(get(node, f"{TASKS}/tasks", state="complete", datasource="api")) == [ingested]
    assert ids(get(node, f"{TASKS}/tasks", state="complete", max=1)) == [other]  # newest first
    assert set(ids(get(node, f"{TASKS}/completeTasks"))) >= {ingested, other}
    assert ids(get(node, f"{TASKS}/runningTasks")) == [] and ids(get(node, f"{TASKS}/waitingTasks")) == []
    assert ids(get(node, f"{TASKS}/tasks", type="kill", datasource="api")) == []
    assert ingested in ids(get(node, f"{TASKS}/tasks", createdTimeInterval="2000-01-01_3000-01-01"))
    assert ids(get(node, f"{TASKS}/tasks", createdTimeInterval="2000-01-01_2000-01-02")) == []
    statuses = post(node, f"{TASKS}/taskStatus", [ingested, "nope"]).json()
    assert list(statuses) == [ingested] and statuses[ingested]["status"] == "SUCCESS"
    assert set(statuses[ingested]) == {"id", "status", "duration", "errorMsg", "location"}


def test_a_task_with_bad_rows_fails_and_its_report_says_why(node: StrataProcess) -> None:
    root: Path = node.root  # type: ignore[attr-defined]
    bad = root / "bad.json"
    bad.write_text('{"ts": "2020-01-01T00:00:00Z", "k": "a", "n": 1}\nnot json\n')
    failed = wait_for(node, submit(node, rows_spec("api_bad", bad)), "FAILED")
    assert "maxParseExceptions" in failed["errorMsg"]
    report = get(node, f"{TASKS}/task/{failed['id']}/reports").json()["ingestionStatsAndErrors"]["payload"]
    assert report["rowStats"]["buildSegments"]["unparseable"] == 1
    assert report["errorMsg"] == failed["errorMsg"] and len(report["unparseableEvents"]["buildSegments"]) == 1
    assert (
        get(node, "/druid/coordinator/v1/metadata/datasources/api_bad").status_code == 404
    )  # nothing published


def druid_error(resp: httpx.Response, status: int, category: str, words: str) -> None:
    assert resp.status_code == status, resp.text
    body = resp.json()
    assert (
        body["category"] == category and body["error"] == "druidException" and words in body["errorMessage"]
    )


def test_bad_requests_get_druids_answers(node: StrataProcess, ingested: str) -> None:
    druid_error(post(node, f"{TASKS}/task", content=b"{not json"), 400, "INVALID_INPUT", "Malformed JSON")
    druid_error(post(node, f"{TASKS}/task", {"type": "index_hadoop"}), 400, "INVALID_INPUT", "not supported")
    druid_error(post(node, f"{TASKS}/task", {"type": "kill", "dataSource": "api", "interval": "2020/2021",
                                              "id": ingested}), 400, "INVALID_INPUT", "already exists")  # fmt: skip
    missing = get(node, f"{TASKS}/task/nope/status")
    assert (missing.status_code, missing.json()) == (404, {"task": "nope", "status": None})
    assert get(node, f"{TASKS}/task/nope").json() == {"task": "nope", "payload": None}
    for path, words in (("reports", "No task reports were found"), ("log", "No log was found")):
        resp = get(node, f"{TASKS}/task/nope/{path}")
        assert resp.status_code == 404 and resp.text.startswith(words)
    druid_error(
        post(node, f"{TASKS}/task/nope/shutdown"), 404, "NOT_FOUND", "Cannot find task with id [nope]"
    )
    state = get(node, f"{TASKS}/tasks", state="sleeping")
    assert state.status_code == 400 and state.text == (
        "Invalid task state[sleeping]. Must be one of [pending, waiting, running, complete].")  # fmt: skip
    druid_error(get(node, f"{TASKS}/tasks", max="many"), 400, "INVALID_INPUT", "[max]")
    druid_error(httpx.put(f"{node.url}{TASKS}/task", timeout=30), 405, "INVALID_INPUT", "PUT")
    assert post(node, f"{TASKS}/task/{ingested}/shutdown").json() == {
        "task": ingested
    }  # complete: nothing to do
    assert get(node, f"{TASKS}/task/{ingested}/status").json()["status"]["status"] == "SUCCESS"


def test_task_metrics_under_druids_names(node: StrataProcess, ingested: str) -> None:
    def sample(name: str, **labels: str) -> float | None:
        wanted = name + "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}"
        for line in get(node, "/metrics").text.splitlines():
            if line.startswith(wanted + " "):
                return float(line.split()[-1])
        return None

    deadline = time.monotonic() + 30  # counted by the queue's next pass after the task completed
    while sample("druid_task_success_count_total", dataSource="api") is None:
        assert time.monotonic() < deadline, get(node, "/metrics").text
        time.sleep(0.2)
    assert sample("druid_task_success_count_total", dataSource="api") == 1.0
    assert (
        sample("druid_task_run_time_count", dataSource="api", taskStatus="SUCCESS", taskType="index_parallel")
        == 1.0
    )
    assert "druid_task_running_count" in get(node, "/metrics").text


def test_the_leader_answers_as_druids_does(node: StrataProcess) -> None:
    for api in ("indexer", "coordinator"):
        assert get(node, f"/druid/{api}/v1/isLeader").json() == {"leader": True}
        assert get(node, f"/druid/{api}/v1/leader").text == f"http://{node.address}"


def test_a_second_coordinator_on_the_same_store_refuses_to_start(node: StrataProcess, tmp_path: Path) -> None:
    root: Path = node.root  # type: ignore[attr-defined]
    other = coordinator(tmp_path, str(root / "meta.db"))
    with running([other]):
        other.start(wait=None)
        assert other.proc is not None and other.proc.wait(30) == 1
    assert "another coordinator" in other.log_text() and node.address in other.log_text()


def kill_scene(node: StrataProcess, ds: str) -> tuple[Path, list[str]]:
    """Three days of `ds` published; the first two marked unused. Returns the deep storage root and
    the unused ids."""
    root: Path = node.root  # type: ignore[attr-defined]
    rows = [{"ts": f"2020-02-0{d}T01:00:00Z", "k": "a", "n": d} for d in (1, 2, 3)]
    assert wait_for(node, submit(node, rows_spec(ds, write_rows(root / f"{ds}.json", rows))), "SUCCESS")
    with closing(open_metadata_store(str(root / "meta.db"))) as store:
        segments = sorted(store.used_segments(ds), key=lambda s: s.interval.start)
        store.mark_unused([s.id for s in segments[:2]])
    return root / "deep", [s.id for s in segments[:2]]


def rows_and_files(node: StrataProcess, ds: str) -> tuple[dict[str, bool], set[str]]:
    root: Path = node.root  # type: ignore[attr-defined]
    with closing(open_metadata_store(str(root / "meta.db"))) as store:
        records = {r.segment.id: r.used for r in store.segments(ds, include_unused=True)}
    files = {str(p.parent) for p in (root / "deep" / ds).glob("*/*/*/index.parquet")}
    return records, files


def test_a_kill_task_removes_unused_segments_files_and_rows(node: StrataProcess) -> None:
    _, unused = kill_scene(node, "api_kill")
    before, files_before = rows_and_files(node, "api_kill")
    assert len(before) == 3 and len(files_before) == 3
    body = {
        "type": "kill",
        "dataSource": "api_kill",
        "interval": "2020-02-01/2020-02-03T12:00:00Z",
        "batchSize": 1,
    }
    task_id = submit(node, body)
    assert wait_for(node, task_id, "SUCCESS")["errorMsg"] is None
    after, files_after = rows_and_files(node, "api_kill")
    assert set(after) == set(before) - set(unused) and all(after.values())  # the used day stays
    assert len(files_after) == 1 and all(i not in f for f in files_after for i in unused)
    report = get(node, f"{TASKS}/task/{task_id}/reports").json()["killUnusedSegments"]
    assert report["payload"] == {
        "numSegmentsKilled": 2,
        "numBatchesProcessed": 2,
        "numSegmentsMarkedAsUnused": 0,
    }


def test_the_coordinator_api_kill_submits_a_kill_task(node: StrataProcess) -> None:
    kill_scene(node, "api_kill2")
    resp = httpx.delete(f"{node.url}/druid/coordinator/v1/datasources/api_kill2/intervals/2020-02-01_2020-02-04",
                        timeout=30)  # fmt: skip
    assert resp.status_code == 200 and resp.content == b""
    kills = get(node, f"{TASKS}/tasks", datasource="api_kill2", type="kill").json()
    assert len(kills) == 1 and kills[0]["id"].startswith("api-issued_kill_api_kill2_")
    wait_for(node, kills[0]["id"], "SUCCESS")
    rows, files = rows_and_files(node, "api_kill2")
    assert len(rows) == 1 and len(files) == 1


def test_tasks_run_against_postgresql_too(postgres_url: str, tmp_path: Path) -> None:
    process = coordinator(tmp_path, postgres_url)
    with running([process]):
        process.start()
        rows = write_rows(tmp_path / "rows.json", ROWS)
        task_id = submit(process, rows_spec("pg", rows, intervals=["2020-01-01/2020-01-03"]))
        assert wait_for(process, task_id, "SUCCESS")["errorMsg"] is None
        with closing(open_metadata_store(postgres_url)) as store:
            segments = store.used_segments("pg")
            assert store.mark_unused([s.id for s in segments]) == 2
        kill = submit(process, {"type": "kill", "dataSource": "pg", "interval": "2020-01-01/2020-01-03"})
        assert wait_for(process, kill, "SUCCESS")["errorMsg"] is None
    with closing(open_metadata_store(postgres_url)) as store:
        assert store.segments("pg", include_unused=True) == []
    assert list((tmp_path / "deep").glob("pg/*/*/*/index.parquet")) == []
