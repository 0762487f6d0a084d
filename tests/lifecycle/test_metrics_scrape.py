"""`/metrics` on a real historical and broker after queries: Druid's emitter names, values that moved.

Expected names, types and labels are those of Druid's prometheus-emitter (`defaultMetrics.json`:
namespace `druid`, lower-cased, `/` -> `_`; timers are histograms in seconds, counts counters).
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from harness.processes import StrataProcess, running
from tests.historical.segment_factory import HistoricalCluster, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

ROWS_PER_SEGMENT = 20  # build_segment's default
DAYS = [0, 1, 2]
TIMESERIES = {
    "queryType": "timeseries", "dataSource": "wiki", "intervals": ["2015-09-01/2015-09-10"],
    "granularity": "all", "aggregations": [{"type": "longSum", "name": "rows", "fieldName": "count"}],
    "context": {"useResultLevelCache": False, "populateResultLevelCache": False},
}  # fmt: skip


def scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """(sample name, sorted labels) -> value, and the family types under ("#type", name)."""
    text = httpx.get(url + "/metrics", timeout=10).text
    out: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for family in text_string_to_metric_families(text):
        out[("#" + family.type, ((family.name, ""),))] = 1.0
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def value(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), float("nan"))


def kind(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], family: str) -> str | None:
    found = [k[0][1:] for k in samples if k[0].startswith("#") and k[1][0][0] == family]
    return found[0] if found else None


def test_druid_metric_names_on_historical_and_broker(tmp_path: Path) -> None:
    cluster = HistoricalCluster(tmp_path)
    cluster.add_segments("wiki", DAYS)
    historical = cluster.historical("h1", zk=False)
    broker = StrataProcess("broker", [], tmp_path / "broker.log")
    with running([historical, broker]):
        historical.start().wait_http("/status/ready", timeout=60)
        broker.args = ["--discovery", "http", "--nodes", historical.address, "--cache", "lru",
                       "--result-cache", "off"]  # fmt: skip
        broker.start()
        wait_until(lambda: httpx.get(broker.url + "/druid/v2/datasources", timeout=5).json() == ["wiki"], 30,
                   "the broker to see wiki")  # fmt: skip
        before = scrape(broker.url)
        for _ in range(2):  # the second one from the per-segment cache
            answer = httpx.post(broker.url + "/druid/v2/", json=TIMESERIES, timeout=30).json()
            assert answer[0]["result"]["rows"] == ROWS_PER_SEGMENT * len(DAYS)
        b, h = scrape(broker.url), scrape(historical.url)

    labels = {"dataSource": "wiki", "type": "timeseries"}
    for samples in (b, h):
        assert kind(samples, "druid_query_time") == "histogram"
        assert value(samples, "druid_query_time_count", **labels) >= 1
        assert value(samples, "druid_query_time_bucket", **labels, le="300.0") >= 1  # Druid's buckets
        assert kind(samples, "druid_query_count") == "counter"  # sampled as druid_query_count_total
        assert value(samples, "druid_query_count_total") >= 1
        assert value(samples, "druid_query_success_count_total") >= 1
        assert value(samples, "druid_segment_count", dataSource="wiki") == len(DAYS)
        assert value(samples, "process_cpu_seconds_total") > 0
        assert value(samples, "process_resident_memory_bytes") > 0
        assert not any(name.startswith("druid_jvm") for (name, _), _v in samples.items())

    assert value(b, "druid_query_time_count", **labels) == 2
    assert value(before, "druid_query_count_total") == 0 and value(b, "druid_query_count_total") == 2
    assert value(b, "druid_query_node_time_count", server=historical.address) == 1  # second: all cached
    assert value(b, "druid_query_cache_total_hits") == len(DAYS)
    assert value(b, "druid_query_cache_total_misses") == len(DAYS)
    assert value(b, "druid_query_cache_total_put_ok") == len(DAYS)
    assert value(b, "druid_query_cache_total_hitrate") == pytest.approx(0.5)
    assert value(b, "druid_query_cache_total_numentries") == len(DAYS)
    assert value(b, "druid_query_cache_total_sizebytes") > 0
    for name in ("hits", "misses", "evictions", "hitrate", "averagebytes", "timeouts", "errors", "put_ok",
                 "put_oversized", "numentries", "sizebytes"):  # fmt: skip
        assert kind(b, f"druid_query_cache_delta_{name}") == "gauge", name
    assert value(b, "strata_broker_queries_total", type="timeseries", status="200") == 2  # Strata's own stay

    assert value(h, "druid_query_segment_time_count") == len(DAYS)  # one query reached it, 3 segments
    assert value(h, "druid_query_wait_time_count") == 1
    assert value(h, "druid_query_time_count", **labels) == 1
    assert value(h, "strata_historical_segments_loaded") == len(DAYS)
