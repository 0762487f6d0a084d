"""Shared pieces of the coordinator tests: a real `strata coordinator` process, task specs over rows
the test writes, and the task API's calls (submit, wait for a state)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import httpx

from harness.processes import StrataProcess
from tests.cluster.cluster_kit import synthetic_spec

HOLD_DIR = Path(__file__).parent / "hold_publish"
TASKS = "/druid/indexer/v1"


def coordinator(tmp_path: Path, metadata: str, *extra: str, hold: Path | None = None,
                name: str = "coordinator", port: int | None = None) -> StrataProcess:  # fmt: skip
    """A coordinator over `metadata` and `tmp_path/deep` (not started). With `hold`, its task
    processes hold every publish while `hold/hold` exists (hold_publish/sitecustomize.py)."""
    env = {"STRATA_METADATA": metadata}
    if hold is not None:
        hold.mkdir(parents=True, exist_ok=True)
        env |= {"PYTHONPATH": str(HOLD_DIR), "STRATA_TEST_HOLD_PUBLISH": str(hold)}
    args = ["--deep-storage", str(tmp_path / "deep"), "--task-log-dir", str(tmp_path / "task-logs"), *extra]
    node = StrataProcess("coordinator", args, tmp_path / f"{name}.log", env=env)
    if port is not None:
        node.port = port
    return node


def rows_spec(data_source: str, rows: Path, *, intervals: Sequence[str] = (), granularity: str = "day",
              append: bool = False, context: dict[str, Any] | None = None) -> dict[str, Any]:  # fmt: skip
    """An index_parallel task over JSON rows `{"ts", "k", "n"}` (cluster_kit's spec, with the task's
    `intervals` and `context`)."""
    spec = synthetic_spec(data_source, rows, granularity, append=append)
    if intervals:
        spec["spec"]["dataSchema"]["granularitySpec"]["intervals"] = list(intervals)
    return {**spec, **({"context": context} if context else {})}


def write_rows(path: Path, rows: Iterable[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def submit(node: StrataProcess | str, body: dict[str, Any]) -> str:
    url = node if isinstance(node, str) else node.url
    resp = httpx.post(f"{url}{TASKS}/task", json=body, timeout=30)
    assert resp.status_code == 200, resp.text
    return str(resp.json()["task"])


def status(node: StrataProcess | str, task_id: str) -> dict[str, Any]:
    url = node if isinstance(node, str) else node.url
    resp = httpx.get(f"{url}{TASKS}/task/{task_id}/status", timeout=30)
    assert resp.status_code == 200, resp.text
    return dict(resp.json()["status"])


def wait_for(node: StrataProcess | str, task_id: str, *codes: str, timeout: float = 120) -> dict[str, Any]:
    """Poll the task's status (as Airflow's Druid operator does) until its statusCode or runner
    status is one of `codes`."""
    deadline = time.monotonic() + timeout
    while True:
        got = status(node, task_id)
        if got["statusCode"] in codes or got["runnerStatusCode"] in codes:
            return got
        if got["statusCode"] != "RUNNING" and not {"SUCCESS", "FAILED"} & set(codes):
            raise AssertionError(f"task {task_id} ended {got} while waiting for {codes}")
        assert time.monotonic() < deadline, f"task {task_id} not {codes} within {timeout}s: {got}"
        time.sleep(0.2)


def wait_file(path: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} did not appear within {timeout}s"
        time.sleep(0.1)


def publishing(hold: Path) -> list[Path]:
    """The markers of task processes held at their publish (see hold_publish/sitecustomize.py)."""
    return sorted(hold.glob("publishing-*"))


def wait_publishing(hold: Path, count: int, timeout: float = 90) -> list[Path]:
    deadline = time.monotonic() + timeout
    while len(publishing(hold)) < count:
        assert time.monotonic() < deadline, f"{count} task(s) not at their publish within {timeout}s"
        time.sleep(0.1)
    return publishing(hold)
