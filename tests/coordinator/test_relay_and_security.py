"""The broker relaying the coordinator's APIs (`--coordinator HOST:PORT`), a broker that knows no
coordinator answering Druid's 503 body, and a secured coordinator: who may submit, read and list."""

from __future__ import annotations

import base64
import secrets
import time
from contextlib import closing
from pathlib import Path

import httpx
import pytest

from harness.processes import StrataProcess, running
from strata.security.resources import Action, Permission, ResourceType
from strata.security.store import open_security_store
from tests.coordinator.kit import TASKS, coordinator, rows_spec, submit, wait_for, write_rows

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

ROWS = [{"ts": f"2020-01-01T{h:02d}:00:00Z", "k": "a", "n": h} for h in range(5)]


def broker(tmp_path: Path, *extra: str) -> StrataProcess:
    # a data node nobody runs: the relay needs none
    return StrataProcess("broker", ["--discovery", "http", "--nodes", "127.0.0.1:1", *extra],
                         tmp_path / f"broker{len(extra)}.log")  # fmt: skip


def test_the_broker_relays_the_task_api_and_says_when_it_knows_no_coordinator(tmp_path: Path) -> None:
    node = coordinator(tmp_path, str(tmp_path / "meta.db"))
    relay, alone = broker(tmp_path, "--coordinator", node.address), broker(tmp_path)
    with running([node, relay, alone]):
        for p in (node, relay, alone):
            p.start()
        task_id = submit(relay.url, rows_spec("relayed", write_rows(tmp_path / "rows.json", ROWS)))
        assert wait_for(relay.url, task_id, "SUCCESS")["errorMsg"] is None
        direct = httpx.get(f"{node.url}{TASKS}/tasks", timeout=30).json()
        assert httpx.get(f"{relay.url}{TASKS}/tasks", timeout=30).json() == direct
        missing = httpx.get(f"{relay.url}{TASKS}/task/nope/reports", timeout=30)
        assert missing.status_code == 404 and missing.text.startswith("No task reports")  # the coordinator's
        lists = httpx.get(f"{relay.url}/druid/coordinator/v1/datasources", timeout=30)
        assert lists.json() == ["relayed"]
        refused = httpx.get(f"{alone.url}{TASKS}/tasks", timeout=30)
        assert refused.status_code == 503
        body = refused.json()
        assert body["category"] == "SERVICE_UNAVAILABLE" and "--coordinator" in body["errorMessage"]


def auth(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


def test_a_secured_coordinator_checks_write_to_submit_and_read_to_look(tmp_path: Path) -> None:
    meta = str(tmp_path / "meta.db")
    admin, reader = secrets.token_hex(8), secrets.token_hex(8)
    node = coordinator(tmp_path, meta, "--authenticator", "basic", "--auth-poll-seconds", "0.5")
    node.env |= {"STRATA_ADMIN_PASSWORD": admin, "STRATA_INTERNAL_PASSWORD": secrets.token_hex(8)}
    spec = rows_spec("secret", write_rows(tmp_path / "rows.json", ROWS))
    with running([node]):
        node.start()
        with closing(open_security_store(meta)) as store:  # what Druid's user API would write
            store.create_user("reader")
            store.set_password("reader", reader)
            store.create_role("readers")
            store.set_permissions("readers", [Permission.of("secret", ResourceType.DATASOURCE, Action.READ)])
            store.assign("reader", "readers")
        url = f"{node.url}{TASKS}/task"
        assert httpx.post(url, json=spec, timeout=30).status_code == 401
        as_reader = httpx.post(url, json=spec, headers=auth("reader", reader), timeout=30)
        for _ in range(50):  # the coordinator re-reads users every 0.5 s
            if as_reader.status_code != 401:
                break
            time.sleep(0.2)
            as_reader = httpx.post(url, json=spec, headers=auth("reader", reader), timeout=30)
        assert as_reader.status_code == 403  # READ on the data source is not WRITE
        submitted = httpx.post(url, json=spec, headers=auth("admin", admin), timeout=30)
        assert submitted.status_code == 200, submitted.text
        task_id = submitted.json()["task"]
        with httpx.Client(headers=auth("reader", reader), timeout=30) as client:
            status = client.get(f"{node.url}{TASKS}/task/{task_id}/status")
            assert status.status_code == 200 and status.json()["task"] == task_id
            assert client.post(f"{node.url}{TASKS}/task/{task_id}/shutdown").status_code == 403
            assert [t["id"] for t in client.get(f"{node.url}{TASKS}/tasks").json()] == [task_id]
            assert client.delete(f"{node.url}/druid/coordinator/v1/datasources/secret").status_code == 403
        assert httpx.get(f"{node.url}/druid/indexer/v1/isLeader", timeout=30).json() == {"leader": True}
