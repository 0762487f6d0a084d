"""SQL ingestion on a secured cluster (basic authentication over one metadata store; users made
through Druid's HTTP API): a statement needs WRITE on its target, READ on each data source it reads
and READ on EXTERNAL when it reads external data, else Druid's 403 SqlTaskStatus; the coordinator
asks the same of the task when it is posted to it directly."""

from __future__ import annotations

import json
import secrets
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.coordinator.kit import TASKS
from tests.security.secured_cluster import AUTHN, AUTHZ, ROWS, Secured, secured_cluster
from tests.sql_ingest.kit import SQL_TASK, sql_string

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

INLINE_ROWS: list[dict[str, Any]] = [
    {"ts": f"2025-02-01T0{h}:00:00Z", "k": "new", "n": 100 + h} for h in range(4)
]
INLINE = ("INSERT INTO copied SELECT TIME_PARSE(ts) AS __time, k, n FROM TABLE(inline(data => "
          f"{sql_string(chr(10).join(json.dumps(r) for r in INLINE_ROWS))}, format => 'json')) "
          "EXTEND (ts VARCHAR, k VARCHAR, n BIGINT) PARTITIONED BY DAY")  # fmt: skip
REINDEX = "INSERT INTO copied SELECT __time, k, n FROM wikipedia PARTITIONED BY DAY"


def _perm(name: str, kind: str, action: str) -> dict[str, Any]:
    return {"resource": {"name": name, "type": kind}, "action": action}


def _grant(c: Secured, user: str, perms: list[dict[str, Any]]) -> None:
    """`user` (made on first use) holds exactly `perms`, through a role of its own."""
    role = f"{user}_role"

    def call(path: str, body: Any = None) -> None:
        resp = httpx.post(c.broker.url + path, json=body, headers=c.auth("admin"), timeout=30)
        assert resp.status_code == 200, (path, resp.text)

    if user not in c.passwords:
        c.passwords[user] = f"{user}-{secrets.token_hex(8)}"
        call(f"{AUTHZ}/roles/{role}")
        call(f"{AUTHN}/users/{user}")
        call(f"{AUTHN}/users/{user}/credentials", {"password": c.passwords[user]})
        call(f"{AUTHZ}/users/{user}")
        call(f"{AUTHZ}/users/{user}/roles/{role}")
    call(f"{AUTHZ}/roles/{role}/permissions", perms)


def _post(c: Secured, user: str | None, sql: str) -> httpx.Response:
    headers = c.auth(user) if user else {}
    return httpx.post(c.broker.url + SQL_TASK, json={"query": sql}, headers=headers, timeout=60)


def _until_status(c: Secured, user: str, sql: str, status: int) -> httpx.Response:
    """The broker re-reads users and roles every half second: ask until the answer is `status`."""
    deadline = time.monotonic() + 30
    while True:
        resp = _post(c, user, sql)
        if resp.status_code == status or time.monotonic() > deadline:
            return resp
        time.sleep(0.3)


def _until_known(c: Secured, user: str) -> None:
    """The coordinator re-reads users on its own schedule: ask it until it knows `user` (the broker
    passes a task on with the user's identity, which a coordinator not yet knowing it refuses)."""
    assert c.coordinator is not None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        resp = httpx.get(f"{c.coordinator.url}{TASKS}/tasks", headers=c.auth(user), timeout=30)
        if resp.status_code != 401:
            return
        time.sleep(0.3)
    raise AssertionError(f"the coordinator did not learn of {user} within 30 s")


def _succeeds(c: Secured, task_id: str) -> None:
    deadline = time.monotonic() + 120
    while True:
        status = httpx.get(
            f"{c.broker.url}{TASKS}/task/{task_id}/status", headers=c.auth("admin"), timeout=30
        )
        state = status.json()["status"]
        if state["statusCode"] != "RUNNING":
            assert state["statusCode"] == "SUCCESS", state
            return
        assert time.monotonic() < deadline, state
        time.sleep(0.3)


def _resubmitted(c: Secured, task_id: str, user: str) -> int:
    """The task's payload (as the coordinator keeps it) posted to the coordinator again as `user`."""
    assert c.coordinator is not None
    url = f"{c.coordinator.url}{TASKS}/task"
    payload = httpx.get(f"{url}/{task_id}", headers=c.auth("admin"), timeout=30).json()["payload"]
    payload["id"] = f"{task_id}-again"
    return httpx.post(url, json=payload, headers=c.auth(user), timeout=30).status_code


def test_sql_ingestion_asks_write_on_the_target_read_on_its_sources_and_external(tmp_path: Path) -> None:
    with secured_cluster(tmp_path, coordinator=True) as c:
        _grant(c, "copier", [_perm("copied", "DATASOURCE", "WRITE")])
        _grant(c, "ingester", [_perm("copied", "DATASOURCE", "WRITE"), _perm("EXTERNAL", "EXTERNAL", "READ")])
        # ingester is known once the broker answers it (a SELECT as a task: not served, a 501)
        assert _until_status(c, "ingester", "SELECT 1", 501).status_code == 501
        assert _post(c, None, INLINE).status_code == 401
        for user, sql in [("bob", INLINE), ("copier", INLINE), ("alice", REINDEX), ("ingester", REINDEX)]:
            refused = _post(c, user, sql)
            assert refused.status_code == 403, (user, refused.text)
            body = refused.json()
            assert (body["taskId"], body["state"]) == ("forbidden", "FAILED")
            assert (body["error"]["category"], body["error"]["errorMessage"]) == ("FORBIDDEN", "Unauthorized")
        listed = httpx.get(f"{c.broker.url}{TASKS}/tasks", headers=c.auth("admin"), timeout=30).json()
        assert listed == []  # no refused statement became a task

        _until_known(c, "ingester")
        # the coordinator re-reads users, then roles, each on its schedule: known is not yet granted
        accepted = _until_status(c, "ingester", INLINE, 202)
        assert accepted.status_code == 202, accepted.text
        inline_task = accepted.json()["taskId"]
        _succeeds(c, inline_task)
        assert _resubmitted(c, inline_task, "copier") == 403  # the coordinator asks for EXTERNAL too

        _grant(c, "ingester", [_perm("copied", "DATASOURCE", "WRITE"), _perm("EXTERNAL", "EXTERNAL", "READ"),
                               _perm("wikipedia", "DATASOURCE", "READ")])  # fmt: skip
        reindexed = _until_status(c, "ingester", REINDEX, 202)
        assert reindexed.status_code == 202, reindexed.text
        _succeeds(c, reindexed.json()["taskId"])
        assert _resubmitted(c, reindexed.json()["taskId"], "copier") == 403  # no READ on wikipedia

        want = [[len(ROWS) + len(INLINE_ROWS), sum(r["n"] for r in ROWS) + sum(r["n"] for r in INLINE_ROWS)]]
        deadline = time.monotonic() + 60
        while True:
            got = httpx.post(f"{c.broker.url}/druid/v2/sql/", headers=c.auth("admin"), timeout=30,
                             json={"query": "SELECT COUNT(*), SUM(n) FROM copied", "resultFormat": "array"})  # fmt: skip
            if got.status_code == 200 and got.json() == want:
                break
            assert time.monotonic() < deadline, got.text
            time.sleep(0.5)
