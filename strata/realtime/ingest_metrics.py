"""Druid's real-time ingestion metrics under the names its Prometheus emitter gives them.

`ingest/events/processed` becomes `druid_ingest_events_processed` (sampled with `_total`), and
so on, labelled by `dataSource`: a dashboard built on a Druid real-time task's metrics reads a
Strata real-time node unchanged. Values are read at scrape time from the node's own counters.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from prometheus_client.metrics_core import CounterMetricFamily
from prometheus_client.registry import Collector

# Druid's metric -> (help, the node's counter it reads)
INGEST_COUNTERS: dict[str, tuple[str, str]] = {
    "druid_ingest_events_processed": ("Number of events successfully processed.", "accepted"),
    "druid_ingest_events_thrownaway": ("Number of events rejected because they are outside the windowPeriod.",
                                       "thrownAway"),
    "druid_ingest_events_unparseable": ("Number of events rejected because the events are unparseable.",
                                        "unparseable"),
    "druid_ingest_persists_count": ("Number of times persist occurred.", "persists"),
    "druid_ingest_handoff_count": ("Number of handoffs that happened.", "handoffs"),
}  # fmt: skip


class IngestCollector(Collector):
    def __init__(self, data_source: Callable[[], str | None], counts: Callable[[], Mapping[str, float]]):
        self.data_source = data_source
        self.counts = counts

    def collect(self) -> Iterator[CounterMetricFamily]:
        data_source = self.data_source()
        counts = self.counts()
        for name, (doc, key) in INGEST_COUNTERS.items():
            family = CounterMetricFamily(name, doc, labels=["dataSource"])
            if data_source is not None:
                family.add_metric([data_source], float(counts.get(key, 0)))
            yield family
