"""The broker's Prometheus metrics, in a registry of its own (one per app, so tests can run several)."""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Callable, Iterator, Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

from strata.server import loop_lag
from strata.server.druid_metrics import DruidQueryMetrics, add_process_metrics, outcome_of

_QUERY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)


class BrokerMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.druid = DruidQueryMetrics(r, broker=True)  # Druid's names, for Druid's dashboards
        add_process_metrics(r)
        self.query_seconds = Histogram(
            "strata_broker_query_seconds",
            "Query time on the broker",
            ["type"],
            buckets=_QUERY_BUCKETS,
            registry=r,
        )
        self.queries = Counter("strata_broker_queries", "Queries answered", ["type", "status"], registry=r)
        self.segments_queried = Counter(
            "strata_broker_segments_queried", "Segments read per query (cached or fetched)", registry=r
        )
        self.segments_from_metadata = Counter(
            "strata_broker_segments_from_metadata",
            "Segments answered from the row counts and times historicals announce, no data node asked",
            registry=r,
        )
        self.node_request_seconds = Histogram(
            "strata_broker_node_request_seconds",
            "Time of one request to a data node",
            ["server"],
            buckets=_QUERY_BUCKETS,
            registry=r,
        )
        self.node_failures = Counter(
            "strata_broker_node_failures", "Data node requests that failed", ["server"], registry=r
        )
        self.streamed_rows = Counter(
            "strata_broker_streamed_rows", "Rows sent in streamed Arrow scan answers", registry=r
        )
        self.streamed_segments = Counter(
            "strata_broker_streamed_segments", "Segments read for streamed Arrow scan answers", registry=r
        )
        self.streamed_bytes = Counter(
            "strata_broker_streamed_bytes", "Bytes sent in streamed Arrow scan answers", registry=r
        )
        self.retries = Counter("strata_broker_retries", "Retry rounds for missing segments", registry=r)
        self.missing_segments = Counter(
            "strata_broker_missing_segments", "Segments no server could answer", registry=r
        )
        self.inventory_segments = Gauge(
            "strata_broker_inventory_segments", "Segments in the view", registry=r
        )
        self.lost_segments = Gauge(
            "strata_broker_lost_segments",
            "Segments whose every server vanished and no other server announced yet",
            registry=r,
        )
        self.inventory_servers = Gauge(
            "strata_broker_inventory_servers", "Data servers in the view", registry=r
        )
        self.inventory_connected = Gauge(
            "strata_broker_inventory_connected",
            "1 when the segment inventory source is reachable",
            registry=r,
        )
        self.running_queries = Gauge("strata_broker_running_queries", "Queries running now", registry=r)
        self.queued_queries = Gauge("strata_broker_queued_queries", "Queries waiting for a slot", registry=r)
        self.process_merges = Counter(
            "strata_broker_process_merges",
            "Large merges run in a worker process (--merge-processes)",
            registry=r,
        )
        self.loop_lag = Histogram(
            "strata_broker_event_loop_lag_seconds",
            "How late the event loop ran a timer that was due (the wait of every request's steps)",
            buckets=loop_lag.BUCKETS,
            registry=r,
        )
        self._timers: dict[str, Histogram] = {}  # query_seconds' child per type (strata.server.druid_metrics)
        self.native_queries = 0  # run by this broker (SQL statements' too), for /status/cluster's rates
        # a dataSource label only for datasources the broker serves: a client naming a new one on every
        # query must not grow a histogram per name (the broker binds its server view's)
        self.serves: Callable[[str], bool] = lambda data_source: True
        self.node_requests: Tally[str] = Tally()  # requests to each data node, for /status/cluster

    def on_query(self, data_source: str, query_type: str, seconds: float, status: int) -> None:
        """One query answered; one on a datasource the broker does not serve is labeled `""`."""
        timer = self._timers.get(query_type)
        if timer is None:
            timer = self._timers[query_type] = self.query_seconds.labels(query_type)
        timer.observe(seconds)
        label = data_source if self.serves(data_source) else ""
        self.druid.on_query(label, query_type, seconds, outcome_of(status))

    def on_node_request(self, server: str, seconds: float, ok: bool) -> None:
        self.node_request_seconds.labels(server).observe(seconds)
        self.node_requests[server] += 1
        self.druid.on_node(server, seconds)
        if not ok:
            self.node_failures.labels(server).inc()

    def bind_refusals(self, by_lane: Mapping[str, int]) -> None:
        """`strata_broker_query_capacity_exceeded_total{lane}`: the 429s so far, read at scrape time."""
        self.registry.register(_RefusalCollector(by_lane))

    def bind_cache(self, collector: Collector) -> None:
        self.registry.register(collector)

    def bind_gauges(
        self,
        segments: Callable[[], float],
        servers: Callable[[], float],
        connected: Callable[[], float],
        running: Callable[[], float],
        queued: Callable[[], float],
        lost: Callable[[], float] = lambda: 0.0,
    ) -> None:
        """Gauges read live values at scrape time."""
        self.inventory_segments.set_function(segments)
        self.lost_segments.set_function(lost)
        self.inventory_servers.set_function(servers)
        self.inventory_connected.set_function(connected)
        self.running_queries.set_function(running)
        self.queued_queries.set_function(queued)


class _RefusalCollector(Collector):
    def __init__(self, by_lane: Mapping[str, int]) -> None:
        self.by_lane = by_lane

    def collect(self) -> Iterator[CounterMetricFamily]:
        family = CounterMetricFamily(
            "strata_broker_query_capacity_exceeded",
            "Queries refused with 429 (query capacity exceeded), by lane ('total': the broker's capacity)",
            labels=["lane"],
        )
        for lane, n in sorted(self.by_lane.items()):
            family.add_metric([lane], n)
        yield family
