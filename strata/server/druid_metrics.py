"""Prometheus metrics under the names Druid's Prometheus emitter produces, so Druid dashboards work.

Druid's `prometheus-emitter` extension maps each Druid metric of its `defaultMetrics.json` to a
Prometheus name: namespace `druid`, the metric name lower-cased with every `/` turned into `_`
(`strata/query/cache/delta/hitRate` -> `druid_query_cache_delta_hitrate`); a `timer` becomes a histogram in
seconds with the buckets below, a `count` a counter, a `gauge` a gauge; labels are the metric's
dimensions (`dataSource`, `type`, `server`). The same names are used here, with the same types,
labels and buckets. Everything Strata-specific stays under `strata_`.

One class per concern so the broker, the historical and the real-time node share them:
`DruidQueryMetrics` (query counts and times), `DruidCacheCollector` (cache delta/total gauges),
`SegmentCountCollector` (`druid_segment_count` per data source), `add_process_metrics`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector

from cache.stats import CacheStats

# the buckets of the emitter's timer histograms (seconds)
DRUID_BUCKETS = (0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 30, 60, 120, 300)

OUTCOMES = ("success", "failed", "interrupted", "timeout")


def add_process_metrics(registry: CollectorRegistry) -> None:
    """prometheus-client's process_*, python_gc_* and python_info (Druid's would be druid_jvm_*)."""
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)


class DruidQueryMetrics:
    """`druid_query_time{dataSource,type}` and the query counters; per-node/segment timers on demand."""

    def __init__(self, registry: CollectorRegistry, *, broker: bool):
        r = registry
        self.query_time = Histogram("druid_query_time", "Seconds taken to complete a query.",
                                    ["dataSource", "type"], buckets=DRUID_BUCKETS, registry=r)  # fmt: skip
        self.query_count = Counter("druid_query_count", "Number of total queries", registry=r)
        self.outcomes = {
            outcome: Counter(f"druid_query_{outcome}_count", f"Number of {outcome} queries", registry=r)
            for outcome in OUTCOMES
        }
        # labelled children by (dataSource, type): `labels()` takes a lock and builds a key per call,
        # ~2 µs of a cached query's ~50
        self._timers: dict[tuple[str, str], Histogram] = {}
        self.node_time: Histogram | None = None
        self.segment_time: Histogram | None = None
        self.wait_time: Histogram | None = None
        if broker:
            self.node_time = Histogram("druid_query_node_time",
                                       "Seconds taken to query individual historical/realtime processes.",
                                       ["server"], buckets=DRUID_BUCKETS, registry=r)  # fmt: skip
        else:
            self.segment_time = Histogram("druid_query_segment_time",
                                          "Seconds taken to query individual segment.",
                                          buckets=DRUID_BUCKETS, registry=r)  # fmt: skip
            self.wait_time = Histogram("druid_query_wait_time",
                                       "Seconds spent waiting for a segment to be scanned.",
                                       buckets=DRUID_BUCKETS, registry=r)  # fmt: skip

    def on_query(self, data_source: str, query_type: str, seconds: float, outcome: str) -> None:
        timer = self._timers.get((data_source, query_type))
        if timer is None:  # prometheus keeps every labelled child anyway: this only skips the lookup
            timer = self._timers[(data_source, query_type)] = self.query_time.labels(data_source, query_type)
        timer.observe(seconds)
        self.query_count.inc()
        self.outcomes[outcome if outcome in self.outcomes else "failed"].inc()

    def on_node(self, server: str, seconds: float) -> None:
        if self.node_time is not None:
            self.node_time.labels(server).observe(seconds)

    def on_segments(self, wait_s: float, run_s: float, segments: int) -> None:
        """One query's segments, scanned together: each gets an equal share of the run time."""
        if self.wait_time is None or self.segment_time is None:
            return
        self.wait_time.observe(wait_s)
        for _ in range(segments):
            self.segment_time.observe(run_s / segments)


def outcome_of(status: int) -> str:
    """Druid's success/failed/interrupted/timeout split from an HTTP status Strata answered with."""
    if status < 400 or status == 304:
        return "success"
    if status == 504:
        return "timeout"
    if status == 499:  # Druid's "Query cancelled"
        return "interrupted"
    return "failed"


class SegmentCountCollector(Collector):
    """`druid_segment_count{dataSource}`, read at scrape time."""

    def __init__(self, counts: Callable[[], Mapping[str, int]]):
        self.counts = counts

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily("druid_segment_count", "Number of segments belonging to a data source.",
                                   labels=["dataSource"])  # fmt: skip
        for data_source, count in sorted(self.counts().items()):
            family.add_metric([data_source], count)
        yield family


class DruidCacheCollector(Collector):
    """`druid_query_cache_{delta,total}_*` gauges from a cache's stats.

    `total` is since start; `delta` is since the previous scrape (Druid's is since the previous
    emission period; a scrape is this exporter's period). `put_ok` counts partials stored.
    """

    def __init__(self, stats: Callable[[], CacheStats], puts: Callable[[], int] = lambda: 0):
        self.stats = stats
        self.puts = puts
        self._previous: tuple[CacheStats, int] = (CacheStats(), 0)

    def collect(self) -> Iterator[GaugeMetricFamily]:
        now, puts = self.stats(), self.puts()
        before, puts_before = self._previous
        self._previous = (now, puts)
        average = now.bytes / now.entries if now.entries else 0.0
        yield from _cache_families("total", now, puts, average)
        delta = CacheStats(**{k: v - getattr(before, k) for k, v in now.as_dict().items() if k != "hit_rate"})
        yield from _cache_families("delta", delta, puts - puts_before, average)


def _cache_families(kind: str, s: CacheStats, puts: int, average: float) -> Iterator[GaugeMetricFamily]:
    """Druid's cache gauges but put/error: Strata's backends count errors, not failed puts apart."""
    values = {
        "numentries": s.entries,
        "sizebytes": s.bytes,
        "hits": s.hits,
        "misses": s.misses,
        "evictions": s.evictions,
        "hitrate": s.hit_rate,
        "averagebytes": average,
        "timeouts": s.timeouts,
        "errors": s.errors,
        "put_ok": puts,
        "put_oversized": s.put_skipped_too_large,
    }
    for name, value in values.items():
        family = GaugeMetricFamily(f"druid_query_cache_{kind}_{name}", f"Cache {name} ({kind})")
        family.add_metric([], value)
        yield family
