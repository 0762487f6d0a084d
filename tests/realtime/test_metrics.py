"""`/metrics` on a real real-time node after pushes and a query: Druid's query and ingestion names."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.processes import running
from tests.lifecycle.test_metrics_scrape import scrape
from tests.realtime.rt_kit import DS, events, hourly, hourly_answer, push, realtime, write_spec

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def test_druid_ingest_and_query_metric_names_on_a_real_time_node(tmp_path: Path) -> None:
    node = realtime(tmp_path, write_spec(tmp_path, max_rows=40))  # persists after 40 rows in memory
    rows = events(100)
    with running([node]):
        node.start()
        assert push(node, rows[:60]).json()["accepted"] == 60
        body = push(node, [*rows[60:], {"ts": "not a time", "k": "x", "n": 1}, "not an object"]).json()
        assert (body["accepted"], body["unparseable"]) == (40, 2)
        assert push(node, rows[:10], producer="p", seq=1).json()["accepted"] == 10
        assert push(node, rows[:10], producer="p", seq=1).json()["accepted"] == 10  # a retry: applied once
        answer = hourly_answer(node)
        assert answer == hourly([*rows, *rows[:10]])  # the oracle: counted from the pushed rows
        m = scrape(node.url)

    ds = (("dataSource", DS),)
    assert m[("druid_ingest_events_processed_total", ds)] == 110  # 60 + 40 + 10, the retry not again
    assert m[("druid_ingest_events_unparseable_total", ds)] == 2
    assert m[("druid_ingest_events_thrownaway_total", ds)] == 0
    assert m[("druid_ingest_persists_count_total", ds)] >= 1  # 110 rows against a limit of 40
    assert m[("druid_ingest_handoff_count_total", ds)] == 0
    labels = tuple(sorted({"dataSource": DS, "type": "timeseries"}.items()))
    assert m[("druid_query_time_count", labels)] == 1
    assert m[("druid_query_success_count_total", ())] == 1
    assert m[("druid_segment_count", ds)] == len(answer)  # one live segment per hour holding events
    assert m[("process_resident_memory_bytes", ())] > 0
