"""The real-time node in a real cluster: ZooKeeper, a historical, a broker with the LRU cache.

The broker merges live and historical segments, never caches a live partial, and a handoff moves
the live segments to the historical without any answer missing or doubling rows. Expected answers
are Python sums over the pushed and ingested events.
"""

from __future__ import annotations

import threading
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from harness.processes import StrataProcess, running
from strata.ingestion.api import ingest
from strata.storage import open_metadata_store
from tests.cluster.cluster_kit import cluster, served_ids, wait_until, write_rows
from tests.realtime.rt_kit import DS, events, hourly, hourly_answer, push, realtime, status, write_spec

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

SPAN = "2024-12-31/2025-01-02"


def batch_spec(rows: Path) -> dict[str, Any]:
    """The same data schema as the real-time spec, for a day of history ingested in batch."""
    return {"type": "index_parallel", "spec": {
        "dataSchema": {"dataSource": DS, "timestampSpec": {"column": "ts", "format": "iso"},
                       "dimensionsSpec": {"dimensions": ["k"]},
                       "metricsSpec": [{"type": "count", "name": "count"},
                                       {"type": "longSum", "name": "n", "fieldName": "n"}],
                       "granularitySpec": {"segmentGranularity": "day", "rollup": False}},
        "ioConfig": {"type": "index_parallel", "inputFormat": {"type": "json"},
                     "inputSource": {"type": "local", "baseDir": str(rows.parent), "filter": rows.name}}}}  # fmt: skip


def metric(node: StrataProcess, name: str) -> float:
    text = httpx.get(f"{node.url}/metrics", timeout=10).text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith(name + " ") or line.startswith(name + "{"))  # fmt: skip


def cache_entries(broker: StrataProcess) -> int:
    return int(httpx.get(f"{broker.url}/status/cache", timeout=10).json()["backend"]["entries"])


def test_live_and_historical_merge_live_is_never_cached_and_handoff_keeps_every_answer(
    tmp_path: Path, zk_hosts: str
) -> None:
    history = [{**e, "ts": "2024-12-31" + e["ts"][10:]} for e in events(400, offset=7)]
    ingest(batch_spec(write_rows(tmp_path / "history.json", history)), deep_storage=tmp_path / "deep",
           metadata=tmp_path / "meta.db")  # fmt: skip
    base = f"/strata-rt-{uuid.uuid4().hex[:8]}"
    rt = realtime(tmp_path, write_spec(tmp_path), zk=zk_hosts, zk_base=base)
    broker_args = ["--cache", "lru", "--result-cache", "on"]
    with cluster(tmp_path, zk_hosts, base, historicals=1, replicas=1, broker_args=broker_args) as nodes, \
            running([rt]):  # fmt: skip
        historical, broker = nodes.historicals[0], nodes.broker
        rt.start()
        live = events(900)
        assert push(rt, live[:600], "feed", 1).status_code == 200
        assert push(rt, live[600:], "feed", 2).status_code == 200
        want = hourly(history + live)
        wait_until(lambda: hourly_answer(broker, SPAN) == want, "the broker to answer over live and history",
                   logs=[rt, broker])  # fmt: skip

        # the historical day is cached after one query; the live hours are asked every time
        hourly_answer(broker, SPAN)
        entries, hist_q, rt_q = cache_entries(broker), metric(historical, "strata_historical_queries_total"), \
            metric(rt, "druid_query_count_total")  # fmt: skip
        for _ in range(3):
            assert hourly_answer(broker, SPAN) == want
        assert metric(historical, "strata_historical_queries_total") == hist_q
        assert metric(rt, "druid_query_count_total") == rt_q + 3
        assert cache_entries(broker) == entries

        # new events are counted at once, though the same query ran before
        more = events(50, offset=5000)
        assert push(rt, more, "feed", 3).status_code == 200
        want = hourly(history + live + more)
        assert hourly_answer(broker, SPAN) == want

        # handoff while queries run without pause: each answer is the full count, never less or more
        live_ids = served_ids(rt)
        answers: list[Any] = []
        stop = threading.Event()

        def query_forever() -> None:
            while not stop.is_set():
                answers.append(hourly_answer(broker, SPAN))

        runner = threading.Thread(target=query_forever)
        runner.start()
        try:
            resp = httpx.post(f"{rt.url}/v1/push/{DS}/handoff", timeout=10)
            assert resp.status_code == 200 and set(resp.json()["handingOff"]) == live_ids
            wait_until(lambda: not served_ids(rt) and live_ids <= served_ids(historical),
                       "the historical to take over the live segments", timeout=120, logs=[rt, historical])  # fmt: skip
            threading.Event().wait(1.5)  # a few queries after the switch
        finally:
            stop.set()
            runner.join(60)
        assert answers and all(a == want for a in answers), [a for a in answers if a != want][:1]
        store = open_metadata_store(tmp_path / "meta.db")
        try:
            assert live_ids <= {s.id for s in store.used_segments(DS)}  # published under the live ids
        finally:
            store.close()
        assert hourly_answer(historical, SPAN) == want  # the historical alone has it all now
        assert status(rt)["ingestion"]["handedOff"] == sorted(live_ids)

        # a late event for a handed-off hour is counted as thrown away, not silently merged
        late = push(rt, events(1), "feed", 4).json()
        assert (late["accepted"], late["thrownAway"]) == (0, 1)

        # new live rows, then kill -9: the restart replays them, and the handed-off hours stay gone
        fresh = [{**e, "ts": "2025-01-01T05" + e["ts"][13:]} for e in events(40, offset=9000)]
        assert push(rt, fresh, "feed", 5).status_code == 200
        rt.kill()
        again = StrataProcess(rt.subcommand, rt.args, rt.log_path, port=rt.port)
        with running([again]):
            again.start()
            want = hourly(history + live + more + fresh)
            wait_until(lambda: hourly_answer(broker, SPAN) == want, "the broker to answer after the restart",
                       logs=[again, broker])  # fmt: skip
            assert status(again)["segments"] == 1 and status(again)["ingestion"]["handedOff"] == sorted(
                live_ids
            )
            assert push(again, events(1), "feed", 4).json()["duplicate"] is True
