"""Prometheus metrics of one historical process (own registry, so apps in one process never clash)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from strata.server.druid_metrics import (
    DruidQueryMetrics,
    SegmentCountCollector,
    add_process_metrics,
    outcome_of,
)


class HistoricalMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.druid = DruidQueryMetrics(r, broker=False)  # Druid's names, for Druid's dashboards
        add_process_metrics(r)
        self.segments_loaded = Gauge(
            "strata_historical_segments_loaded", "Segments loaded and announced", registry=r
        )
        self.segment_bytes = Gauge(
            "strata_historical_segment_bytes", "Bytes of the loaded segments", registry=r
        )
        self.segments_assigned = Gauge(
            "strata_historical_segments_assigned", "Segments assigned to this node", registry=r
        )
        self.load_failures = Counter(
            "strata_historical_segment_load_failures", "Failed segment loads", registry=r
        )
        self.loads = Counter("strata_historical_segment_loads", "Segments loaded", ["source"], registry=r)
        self.bytes_copied = Counter(
            "strata_historical_segment_copied_bytes", "Bytes copied from deep storage", registry=r
        )
        self.load_seconds = Histogram(
            "strata_historical_segment_load_seconds", "Time to load one segment", registry=r,
            buckets=(0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30, 120),
        )  # fmt: skip
        self.drops = Counter("strata_historical_segment_drops", "Segments dropped", ["reason"], registry=r)
        self.queries = Counter("strata_historical_queries", "Queries answered", ["type", "ok"], registry=r)
        self.query_seconds = Histogram("strata_historical_query_seconds", "Query time", registry=r)

    def bind_segment_counts(self, counts: Callable[[], Mapping[str, int]]) -> None:
        self.registry.register(SegmentCountCollector(counts))

    def on_query(self, data_source: str, query_type: str, seconds: float, status: int) -> None:
        self.queries.labels(query_type, "true" if status < 400 else "false").inc()
        self.query_seconds.observe(seconds)
        self.druid.on_query(data_source, query_type, seconds, outcome_of(status))
