"""Overload on a real broker (issue 36, item 5): admission and Druid's query laning - a streamed SQL
selection its client does not read holds its slot, so the lanes fill for real; a full lane refuses
at once with Druid's 429 while interactive queries keep running, a full broker refuses everything,
and every slot comes back when the streams end - and large merges in worker processes, answering
what the broker's own merge answers."""

from __future__ import annotations

import os
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest

from harness.memory import children
from harness.processes import StrataProcess
from strata.server.thread_priority import LOW_NICE
from tests.cluster.test_broker_cluster import HOURS, cluster, raw, wait_for_segments  # noqa: F401

pytestmark = pytest.mark.integration

COUNT = {"queryType": "timeseries", "dataSource": "wikipedia", "intervals": ["2015-09-12/2015-09-13"],
         "granularity": "all", "aggregations": [{"type": "count", "name": "c"}]}  # fmt: skip
EVERYTHING = "SELECT * FROM wikipedia"  # ~20 MB of JSON: a client that does not read holds its slot
# one small groupBy on the data nodes, then a cross join in the broker's DuckDB that runs for hours
ENGINE_HEAVY = (
    "WITH c AS (SELECT channel, COUNT(*) AS n FROM wikipedia GROUP BY channel) "
    "SELECT COUNT(*) AS x FROM c a, c b, c d, c e, c f, c g WHERE a.n + b.n + d.n + e.n + f.n + g.n = 7"
)


@pytest.fixture(scope="module")
def laned_broker(cluster: dict[str, Any], zk_hosts: str) -> Iterator[StrataProcess]:  # noqa: F811
    flags = ["--zk", zk_hosts, "--zk-base", cluster["base"], "--laning", "hilo",
             "--laning-max-low-percent", "1", "--max-concurrent-queries", "4", "--query-queue", "0"]  # fmt: skip
    broker = StrataProcess("broker", flags, cluster["root"] / "broker-laned.log").start()
    try:
        wait_for_segments(broker, HOURS)
        yield broker
    finally:
        broker.stop()


def status(broker: StrataProcess) -> dict[str, Any]:
    body: dict[str, Any] = httpx.get(broker.url + "/status", timeout=10).json()
    return body


def hold(stack: ExitStack, broker: StrataProcess, **context: Any) -> None:
    """A streamed selection whose body is never read: its slot stays taken until the stack closes."""
    client = stack.enter_context(httpx.Client(timeout=60))
    resp = stack.enter_context(
        client.stream("POST", broker.url + "/druid/v2/sql", json={"query": EVERYTHING, "context": context})
    )
    assert resp.status_code == 200


def until(check: Any, what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def refused(resp: httpx.Response) -> str:
    assert resp.status_code == 429, resp.text[:300]
    body = resp.json()
    assert body["error"] == "Query capacity exceeded" and body["category"] == "CAPACITY_EXCEEDED"
    assert body["errorClass"] == "org.apache.druid.query.QueryCapacityExceededException"
    message: str = body["errorMessage"]
    return message


def test_a_full_low_lane_refuses_at_once_while_interactive_queries_run(
    laned_broker: StrataProcess, wikipedia_sample: Path
) -> None:
    (want,) = raw("SELECT count(*) FROM RAW", wikipedia_sample)[0]
    with ExitStack() as stack:
        hold(stack, laned_broker, priority=-1)
        until(
            lambda: status(laned_broker)["lanes"] == {"low": {"running": 1, "limit": 1}},
            "the low lane filled",
        )
        started = time.monotonic()
        low = httpx.post(
            laned_broker.url + "/druid/v2/", json={**COUNT, "context": {"priority": -1}}, timeout=60
        )
        assert refused(low) == (
            "Too many concurrent queries for lane 'low', query capacity of 1 exceeded. "
            "Please try your query again later."
        )
        assert time.monotonic() - started < 5  # refused, not queued
        sql = {"query": "SELECT COUNT(*) AS c FROM wikipedia", "context": {"priority": -5}}
        assert "lane 'low'" in refused(httpx.post(laned_broker.url + "/druid/v2/sql", json=sql, timeout=60))
        interactive = httpx.post(laned_broker.url + "/druid/v2/", json=COUNT, timeout=60)
        assert interactive.status_code == 200 and interactive.json()[0]["result"] == {"c": want}
    until(lambda: status(laned_broker)["runningQueries"] == 0, "the held slot came back")
    again = httpx.post(
        laned_broker.url + "/druid/v2/", json={**COUNT, "context": {"priority": -1}}, timeout=60
    )
    assert again.status_code == 200 and again.json()[0]["result"] == {"c": want}


def test_a_statement_for_a_full_lane_is_refused_before_it_is_planned(
    laned_broker: StrataProcess, wikipedia_sample: Path
) -> None:
    """Planning a statement only to refuse it would spend the broker's CPU on a flood of retries:
    it is refused first (so even a statement that would not plan gets the 429), unless SET
    statements may move it to another lane."""
    (want,) = raw("SELECT count(*) FROM RAW", wikipedia_sample)[0]
    with ExitStack() as stack:
        hold(stack, laned_broker, priority=-1)
        until(lambda: status(laned_broker)["lanes"]["low"]["running"] == 1, "the low lane filled")
        unplannable = {"query": "SELECT nosuchcolumn FROM wikipedia", "context": {"priority": -1}}
        assert "lane 'low'" in refused(
            httpx.post(laned_broker.url + "/druid/v2/sql", json=unplannable, timeout=60)
        )
        for head in ("", "/* from a BI tool */ ", "-- a note\n"):
            moved = {
                "query": head + "SET priority = 0; SELECT COUNT(*) AS c FROM wikipedia",
                "context": {"priority": -1},
            }
            resp = httpx.post(laned_broker.url + "/druid/v2/sql", json=moved, timeout=60)
            assert resp.status_code == 200 and resp.json() == [{"c": want}], (head, resp.text[:300])
    unplannable["context"] = {"priority": 0}
    resp = httpx.post(laned_broker.url + "/druid/v2/sql", json=unplannable, timeout=60)
    assert resp.status_code == 400 and resp.json()["category"] == "INVALID_INPUT", resp.text[:300]


def _threads_at(pid: int, nice: int) -> dict[str, float]:
    """Thread id -> CPU seconds of a process's threads at this nice value (Linux's /proc)."""
    found = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[16]) == nice:
            name = f"{task.name} {(task / 'comm').read_text().strip()}"
            found[name] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return found


@pytest.mark.skipif(sys.platform != "linux", reason="per-thread nice values are Linux's")
def test_a_low_lane_cross_join_runs_on_one_niced_duckdb_thread_while_cheap_queries_are_answered(
    laned_broker: StrataProcess, wikipedia_sample: Path
) -> None:
    (want,) = raw("SELECT count(*) FROM RAW", wikipedia_sample)[0]
    query_id = f"low-{uuid.uuid4().hex[:8]}"
    body = {"query": ENGINE_HEAVY, "context": {"priority": -1, "sqlQueryId": query_id, "timeout": 60_000}}
    answer: list[httpx.Response] = []
    heavy = threading.Thread(
        target=lambda: answer.append(httpx.post(laned_broker.url + "/druid/v2/sql", json=body, timeout=90))
    )
    heavy.start()
    try:
        until(lambda: status(laned_broker)["sqlEngine"]["low"]["busy"] == 1, "the cross join on a low slot")
        engine = status(laned_broker)["sqlEngine"]
        assert engine["low"] == {"slots": 1, "busy": 1, "threads": 1} and engine["busy"] == 1, engine
        working = _threads_at(laned_broker.pid, LOW_NICE)
        for _ in range(3):  # cheap queries, native and SQL, answered while it runs
            cheap = httpx.post(laned_broker.url + "/druid/v2/", json=COUNT, timeout=60)
            assert cheap.status_code == 200 and cheap.json()[0]["result"] == {"c": want}
            sql = {"query": "SELECT COUNT(*) AS c FROM wikipedia"}
            cheap = httpx.post(laned_broker.url + "/druid/v2/sql", json=sql, timeout=60)
            assert cheap.status_code == 200 and cheap.json() == [{"c": want}]
        time.sleep(0.5)
        grown = {t: cpu - working.get(t, 0.0) for t, cpu in _threads_at(laned_broker.pid, LOW_NICE).items()}
        # its DuckDB work: on one thread at nice 10 (one DuckDB thread, no workers of its own)
        busy = [t for t, cpu in grown.items() if cpu > 0.05]
        assert len(busy) == 1 and grown[busy[0]] > 0.1, (working, grown)
        assert status(laned_broker)["sqlEngine"]["low"]["busy"] == 1  # still running all along
    finally:
        httpx.delete(f"{laned_broker.url}/druid/v2/sql/{query_id}", timeout=10)
        heavy.join(90)
    assert answer and answer[0].status_code == 500 and answer[0].json()["error"] == "Query cancelled"
    until(lambda: status(laned_broker)["sqlEngine"]["busy"] == 0, "the low slot came back")


def test_a_full_broker_refuses_with_the_total_capacity_and_recovers(laned_broker: StrataProcess) -> None:
    with ExitStack() as stack:
        for _ in range(4):
            hold(stack, laned_broker)
        until(lambda: status(laned_broker)["runningQueries"] == 4, "every slot taken")
        message = refused(httpx.post(laned_broker.url + "/druid/v2/", json=COUNT, timeout=60))
        assert message == (
            "Too many concurrent queries, total query capacity of 4 exceeded. Please try your query again later."
        )
    until(lambda: status(laned_broker)["runningQueries"] == 0, "every slot came back")
    assert httpx.post(laned_broker.url + "/druid/v2/", json=COUNT, timeout=60).status_code == 200


def test_a_context_priority_that_is_no_integer_is_a_400(laned_broker: StrataProcess) -> None:
    for body in ({**COUNT, "context": {"priority": "high"}}, {**COUNT, "context": {"lane": 5}}):
        resp = httpx.post(laned_broker.url + "/druid/v2/", json=body, timeout=60)
        assert resp.status_code == 400 and resp.json()["category"] == "INVALID_INPUT", resp.text
    sql = {"query": "SELECT 1", "context": {"priority": [1]}}
    assert httpx.post(laned_broker.url + "/druid/v2/sql", json=sql, timeout=60).status_code == 400


def test_laning_flags_are_checked_at_start(tmp_path: Path) -> None:
    for flags, says in [
        (["--laning", "hilo"], "--laning-max-low-percent"),
        (["--laning", "manual"], "at least one lane"),
        (["--laning", "manual", "--lane", "total=3"], "cannot be named 'total'"),
        (["--lane", "bi=3"], "--lane needs --laning manual"),
    ]:
        broker = StrataProcess("broker", ["--discovery", "http", "--nodes", "127.0.0.1:1", *flags],
                               tmp_path / "broker.log")  # fmt: skip
        try:
            broker.start(wait=None)
            assert broker.proc is not None
            assert broker.proc.wait(timeout=60) == 2
            assert says in broker.log_text(), broker.log_text()[-500:]
        finally:
            broker.stop()


def test_large_merges_in_worker_processes_answer_as_the_broker_does(
    cluster: dict[str, Any],  # noqa: F811
    zk_hosts: str,
    wikipedia_sample: Path,
) -> None:
    """A groupBy of ~30,000 groups merged in a worker process (from 1,000 partial rows here) answers
    byte for byte what a broker merging in its own threads (--merge-processes 0) answers, and what
    DuckDB computes over the raw rows; ordered and limited too."""
    flags = ["--zk", zk_hosts, "--zk-base", cluster["base"], "--merge-processes", "1", "--merge-process-rows",
             "1000"]  # fmt: skip
    query = {"queryType": "groupBy", "dataSource": "wikipedia", "intervals": ["2015-09-12/2015-09-13"],
             "granularity": "all", "dimensions": ["page", "user"],
             "aggregations": [{"type": "count", "name": "c"}, {"type": "longSum", "name": "a", "fieldName": "added"}]}  # fmt: skip
    in_threads = StrataProcess(
        "broker", [*flags[:4], "--merge-processes", "0"], cluster["root"] / "broker-threads.log"
    )
    merging = StrataProcess("broker", flags, cluster["root"] / "broker-merging.log")
    with ExitStack() as stack:
        for broker in (in_threads, merging):
            broker.start()
            stack.callback(broker.stop)
            wait_for_segments(broker, HOURS)
        answers = [httpx.post(b.url + "/druid/v2/", json=query, timeout=120) for b in (in_threads, merging)]
        assert all(a.status_code == 200 for a in answers), [a.text[:300] for a in answers]
        assert answers[0].content == answers[1].content
        got = sorted(
            (e["event"]["page"], e["event"]["user"], e["event"]["c"], e["event"]["a"])
            for e in answers[1].json()
        )
        want = sorted(
            raw('SELECT page, "user", count(*), sum(added) FROM RAW GROUP BY 1, 2', wikipedia_sample)
        )
        assert got == want and len(got) > 1000
        merged_apart = [m for m in httpx.get(merging.url + "/metrics", timeout=10).text.splitlines()
                        if m.startswith("strata_broker_process_merges_total")]  # fmt: skip
        assert merged_apart == ["strata_broker_process_merges_total 1.0"]
        limited = {**query, "limitSpec": {"type": "default", "limit": 10}}
        assert httpx.post(merging.url + "/druid/v2/", json=limited, timeout=120).json() == (
            httpx.post(in_threads.url + "/druid/v2/", json=limited, timeout=120).json()
        )
        workers = children(merging.pid)
        assert workers and not children(in_threads.pid)
        merging.kill()  # kill -9: its merge workers must not stay behind, orphaned
        until(lambda: not any(Path(f"/proc/{pid}").exists() for pid in workers), "the merge workers exited")


def test_a_low_priority_answer_sent_in_pieces_is_the_cheap_lanes_answer(
    laned_broker: StrataProcess, wikipedia_sample: Path
) -> None:
    """A low-priority answer past a piece (256 KiB) goes out in pieces (broker_service.paced_answers),
    native and SQL alike, while a cheap query runs beside it: the same bytes, its length told, and
    what DuckDB computes over the raw rows."""
    grouped = {"queryType": "groupBy", "dataSource": "wikipedia", "intervals": ["2015-09-12/2015-09-13"],
               "granularity": "all", "dimensions": ["page"], "aggregations": [{"type": "count", "name": "c"}]}  # fmt: skip
    sql = {"query": "SELECT page, COUNT(*) AS c FROM wikipedia GROUP BY page"}
    want = sorted(raw("SELECT page, count(*) FROM RAW GROUP BY 1", wikipedia_sample))
    with ExitStack() as stack:
        hold(stack, laned_broker)  # a priority-0 query running: each piece waits for it (50 ms at most)
        for path, body, rows in (("/druid/v2/", grouped, lambda a: [(e["event"]["page"], e["event"]["c"]) for e in a]),
                                 ("/druid/v2/sql", sql, lambda a: [(r["page"], r["c"]) for r in a])):  # fmt: skip
            cheap, low = (httpx.post(laned_broker.url + path, json={**body, "context": {"priority": p}}, timeout=120)
                          for p in (0, -1))  # fmt: skip
            assert cheap.status_code == low.status_code == 200, low.text[:300]
            assert len(low.content) > 256 * 1024 and low.headers["content-length"] == str(len(low.content))
            assert low.content == cheap.content
            assert sorted(rows(low.json())) == want
