"""`strata quickstart` end to end: real child processes, Druid's published tutorial answer."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from strata.cli.local_servers import free_port
from tests.lifecycle.test_quickstart_lifecycle import quickstart

pytestmark = pytest.mark.integration

# Druid's tutorial "top 10 pages by edits" on the wikipedia sample (docs/tutorials/tutorial-query.md)
PUBLISHED = [
    ("Wikipedia:Vandalismusmeldung", 33),
    ("User:Cyde/List of candidates for speedy deletion/Subpage", 28),
    ("Jeremy Corbyn", 27),
    ("Wikipedia:Administrators' noticeboard/Incidents", 21),
    ("Flavia Pennetta", 20),
]


def argv(work: Path, *extra: str) -> list[str]:
    return [sys.executable, "-P", "-m", "strata.cli.main", "quickstart", "--dir", str(work), "--port", str(free_port()),
            "--historical-ports", f"{free_port()},{free_port()}", "--realtime-port", str(free_port()),
            "--coordinator-port", str(free_port()), *extra]  # fmt: skip


def test_quickstart_prints_the_tutorial_answer_and_reuses_data(tmp_path: Path) -> None:
    first = subprocess.run(argv(tmp_path, "--exit-after-query"), capture_output=True, text=True, timeout=240)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "ingested 39,244 rows" in first.stdout
    assert "Broker cache: lru, per-segment partials and whole answers" in first.stdout
    assert "Web console on http://127.0.0.1:" in first.stdout and "/console/\n" in first.stdout
    lines = first.stdout.splitlines()
    for page, edits in PUBLISHED:
        assert any(page in line and f" {edits} " in line for line in lines), (page, first.stdout)
    second = subprocess.run(
        argv(tmp_path, "--exit-after-query", "--cache", "none"), capture_output=True, text=True, timeout=240
    )
    assert second.returncode == 0 and "reusing it" in second.stdout
    assert "Broker cache: off (--cache none)" in second.stdout  # as the broker itself reports it
    assert (tmp_path / "broker.log").exists() and (tmp_path / "historical-0.log").exists()
    assert (tmp_path / "realtime.log").exists() and (tmp_path / "realtime-spec.json").exists()


# Stopping (SIGINT, SIGTERM, kill -9, a second quickstart): tests/lifecycle/test_quickstart_lifecycle.py


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[int]]:
    """One quickstart for the tests below (its ports): one pushes to `wikipedia_live`, the other
    reads `wikipedia`'s cache counters as differences, so neither sees the other's traces."""
    with quickstart(tmp_path_factory.mktemp("quickstart")) as (_proc, _pids, ports):
        yield ports


def test_events_pushed_to_the_quickstart_are_counted_at_once_and_after_handoff(running: list[int]) -> None:
    import json
    import time
    from datetime import UTC, datetime

    import httpx

    broker, realtime = f"http://127.0.0.1:{running[0]}", f"http://127.0.0.1:{running[3]}"
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")
    edits = [
        {"time": now, "channel": "#en", "page": f"Page {i % 3}", "user": "u", "added": i} for i in range(10)
    ]
    pushed = httpx.post(f"{realtime}/v1/push/wikipedia_live", content="\n".join(map(json.dumps, edits)),
                        timeout=30)  # fmt: skip
    assert pushed.status_code == 200 and pushed.json()["accepted"] == 10, pushed.text
    sql = {"query": 'SELECT SUM("count") AS edits, SUM(added) AS added FROM wikipedia_live'}

    def counted() -> list[dict[str, int]]:
        resp = httpx.post(f"{broker}/druid/v2/sql", json=sql, timeout=30)
        return list(resp.json()) if resp.status_code == 200 else []

    deadline = time.monotonic() + 60
    while counted() != [{"edits": 10, "added": 45}]:
        assert time.monotonic() < deadline, counted()
        time.sleep(0.3)
    handing = httpx.post(f"{realtime}/v1/push/wikipedia_live/handoff", timeout=30).json()["handingOff"]
    assert len(handing) == 1
    deadline = time.monotonic() + 120
    while httpx.get(f"{realtime}/status", timeout=10).json()["strata"]["segments"]:
        assert counted() == [{"edits": 10, "added": 45}]  # during the handoff too
        assert time.monotonic() < deadline, "the handoff did not finish"
        time.sleep(0.5)
    assert counted() == [{"edits": 10, "added": 45}]


def test_the_quickstart_broker_caches_partials_and_whole_answers(running: list[int]) -> None:
    """The same query twice: Druid's published answer both times, the second from the whole-answer
    cache; the query with a post-aggregator is another whole answer but the same per-segment
    partial, which comes from the per-segment cache."""
    import httpx

    from strata.cli.quickstart import TOP_PAGES

    broker = f"http://127.0.0.1:{running[0]}"

    def status() -> dict:
        return dict(httpx.get(f"{broker}/status/cache", timeout=10).json())

    def top(query: dict) -> list[dict]:
        resp = httpx.post(f"{broker}/druid/v2/", json=query, timeout=60)
        assert resp.status_code == 200, resp.text
        return list(resp.json()[0]["result"])

    before = status()
    assert before["kind"] == "lru"
    assert [(r["page"], r["count"]) for r in top(TOP_PAGES)[:5]] == PUBLISHED  # the quickstart ran it once
    after = status()
    assert after["resultLevel"]["hits"] == before["resultLevel"]["hits"] + 1
    twice = {"type": "arithmetic", "name": "twice", "fn": "*",
             "fields": [{"type": "fieldAccess", "fieldName": "count"}, {"type": "constant", "value": 2}]}  # fmt: skip
    rows = top({**TOP_PAGES, "postAggregations": [twice]})[:5]
    assert [(r["page"], r["count"], r["twice"]) for r in rows] == [(p, n, 2 * n) for p, n in PUBLISHED]
    assert status()["query"]["hits"] > after["query"]["hits"]
