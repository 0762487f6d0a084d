"""Shared pieces of the SQL ingestion tests: a cluster with a coordinator (ZooKeeper, a historical,
a broker that finds the coordinator there), statements posted to `/druid/v2/sql/task` and followed
through the task API, answers read through the SQL API, oracles over raw rows with DuckDB."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import httpx

from harness.processes import StrataProcess, running
from tests.cluster.cluster_kit import Nodes, cluster
from tests.coordinator.kit import TASKS, coordinator

SQL_TASK = "/druid/v2/sql/task"


@dataclass
class Scene:
    root: Path
    nodes: Nodes
    coordinator: StrataProcess

    @property
    def broker(self) -> StrataProcess:
        return self.nodes.broker


@contextmanager
def scene(
    root: Path, zk_hosts: str, base: str, *coordinator_args: str, hold: Path | None = None,
    env: dict[str, str] | None = None,
) -> Iterator[Scene]:  # fmt: skip
    """A coordinator (announced in ZooKeeper under `base`, with `env` added to its environment),
    one historical and a broker."""
    boss = coordinator(root, str(root / "meta.db"), "--zk", zk_hosts, "--zk-base", base, *coordinator_args,
                       hold=hold)  # fmt: skip
    boss.env |= env or {}
    with running([boss]), cluster(root, zk_hosts, base, historicals=1) as nodes:
        boss.start()
        yield Scene(root, nodes, boss)


def post_sql_task(broker: StrataProcess, sql: str, context: dict[str, Any] | None = None,
                  **extra: Any) -> httpx.Response:  # fmt: skip
    body = {"query": sql, **({"context": context} if context else {}), **extra}
    return httpx.post(f"{broker.url}{SQL_TASK}", json=body, timeout=60)


def submit_sql(broker: StrataProcess, sql: str, context: dict[str, Any] | None = None) -> str:
    resp = post_sql_task(broker, sql, context)
    assert resp.status_code == 202, resp.text
    body = resp.json()
    assert body["state"] == "RUNNING" and body["taskId"].startswith("query-"), body
    return str(body["taskId"])


def task_status(url: str, task_id: str) -> dict[str, Any]:
    resp = httpx.get(f"{url}{TASKS}/task/{task_id}/status", timeout=30)
    assert resp.status_code == 200, resp.text
    return dict(resp.json()["status"])


def wait_task(url: str, task_id: str, timeout: float = 180) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        status = task_status(url, task_id)
        if status["statusCode"] != "RUNNING":
            return status
        assert time.monotonic() < deadline, f"task {task_id} still running after {timeout}s: {status}"
        time.sleep(0.3)


def run_sql(broker: StrataProcess, sql: str, context: dict[str, Any] | None = None) -> dict[str, Any]:
    """Submit an INSERT or REPLACE and wait for it to succeed; its status."""
    task_id = submit_sql(broker, sql, context)
    status = wait_task(broker.url, task_id)
    assert status["statusCode"] == "SUCCESS", status
    return status


def report(url: str, task_id: str) -> dict[str, Any]:
    resp = httpx.get(f"{url}{TASKS}/task/{task_id}/reports", timeout=30)
    assert resp.status_code == 200, resp.text
    return dict(resp.json()["multiStageQuery"])


def select(broker: StrataProcess, sql: str) -> list[list[Any]]:
    resp = httpx.post(f"{broker.url}/druid/v2/sql/", json={"query": sql, "resultFormat": "array",
                      "context": {"useCache": False, "populateCache": False}}, timeout=60)  # fmt: skip
    assert resp.status_code == 200, resp.text
    return [list(r) for r in resp.json()]


def eventually(broker: StrataProcess, sql: str, want: Sequence[Sequence[Any]], nodes: Nodes,
               timeout: float = 60) -> None:  # fmt: skip
    """The broker answers `sql` with `want` within `timeout` (historicals load what was published)."""
    deadline = time.monotonic() + timeout
    got: Any = None
    while time.monotonic() < deadline:
        resp = httpx.post(f"{broker.url}/druid/v2/sql/", json={"query": sql, "resultFormat": "array",
                          "context": {"useCache": False, "populateCache": False}}, timeout=60)  # fmt: skip
        got = resp.json() if resp.status_code == 200 else [resp.status_code, resp.text]
        if got == [list(r) for r in want]:
            return
        time.sleep(0.5)
    logs = "\n".join(n.log_text()[-2000:] for n in nodes.all)
    raise AssertionError(f"{sql}\nwanted {want}\ngot    {got}\n{logs}")


def oracle(sql: str, **files: Path) -> list[list[Any]]:
    """DuckDB over the raw input files (named views), apart from Strata's engine."""
    con = duckdb.connect()
    try:
        con.execute("SET TimeZone='UTC'")
        for name, path in files.items():
            reader = "read_parquet" if path.suffix == ".parquet" else "read_json_auto"
            con.execute(f"CREATE VIEW {name} AS SELECT * FROM {reader}('{path}')")
        return [list(r) for r in con.execute(sql).fetchall()]
    finally:
        con.close()


def sql_string(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"
