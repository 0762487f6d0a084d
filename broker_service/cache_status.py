"""What the broker's cache is doing, for operators: `GET /status/cache` and Prometheus metrics.

Two views are published. The *query* view counts per-segment lookups as the broker sees them
(hits, misses, partials shared between concurrent queries, stores). The *backend* view is the
cache's own `CacheStats` (evictions, bytes, errors, timeouts, collisions), per level for the
two-level cache. Both are read at scrape time, so nothing is copied on the query path.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from broker_service.result_cache import ResultLevelCache
from broker_service.segment_cache import SegmentCache
from cache import CacheStats
from cache.stats import COUNTER_NAMES as _BACKEND_COUNTERS
from strata.server.druid_metrics import DruidCacheCollector

# warm: queries answered before routing from every segment's cached partial (broker_service.segment_path)
_QUERY_COUNTERS = ("hits", "misses", "shared", "puts", "errors", "bypassed", "warm")


def backend_levels(policy: SegmentCache) -> dict[str, CacheStats]:
    """`all` for the backend as a whole, plus `l1`/`l2` when it has levels."""
    backend: Any = policy.cache
    levels: dict[str, CacheStats] = {"all": backend.stats()}
    level_stats = getattr(backend, "level_stats", None)
    if level_stats is not None:
        levels.update(level_stats())
    return levels


def cache_status(
    kind: str, policy: SegmentCache | None, results: ResultLevelCache | None = None
) -> dict[str, Any]:
    if policy is None:
        return {"kind": "none"}
    hits, misses = policy.stats["hits"], policy.stats["misses"]
    query_view: dict[str, Any] = {name: policy.stats[name] for name in _QUERY_COUNTERS}
    query_view["hitRate"] = hits / (hits + misses) if hits + misses else 0.0
    query_view["inFlight"] = policy.flights
    levels = backend_levels(policy)
    body: dict[str, Any] = {"kind": kind, "query": query_view, "backend": _camel(levels.pop("all").as_dict())}
    if levels:
        body["levels"] = {name: _camel(stats.as_dict()) for name, stats in levels.items()}
    if results is not None:
        body["resultLevel"] = {"hits": results.hits, "misses": results.misses}
    breakers = _breakers(policy)
    if breakers:
        body["breakers"] = breakers
    return body


def _breakers(policy: SegmentCache) -> dict[str, dict[str, Any]]:
    status = getattr(policy.cache, "breaker_status", None)
    return status() if status is not None else {}


def _camel(d: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for key, value in d.items():
        head, *rest = key.split("_")
        out[head + "".join(w.title() for w in rest)] = value
    return out


class CacheCollector(Collector):
    """Prometheus families `strata_broker_cache_*`, read from the policy and backend at scrape time."""

    def __init__(self, policy: SegmentCache, results: ResultLevelCache | None = None):
        self.policy = policy
        self.results = results

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        stats = self.policy.stats
        for name in _QUERY_COUNTERS:
            family = CounterMetricFamily(
                f"strata_broker_cache_segment_{name}", f"Per-segment cache {name} seen by queries"
            )
            family.add_metric([], stats[name])
            yield family
        hits, misses = stats["hits"], stats["misses"]
        rate = GaugeMetricFamily("strata_broker_cache_hit_rate", "Per-segment hits / (hits + misses)")
        rate.add_metric([], hits / (hits + misses) if hits + misses else 0.0)
        yield rate
        if self.results is not None:
            for name in ("hits", "misses"):
                family = CounterMetricFamily(
                    f"strata_broker_cache_result_{name}", f"Whole-answer (result-level) cache {name}"
                )
                family.add_metric([], getattr(self.results, name))
                yield family
        levels = backend_levels(self.policy)
        for name in _BACKEND_COUNTERS:
            family = CounterMetricFamily(
                f"strata_broker_cache_backend_{name}", f"Cache backend {name}", labels=["level"]
            )
            for level, snapshot in levels.items():
                family.add_metric([level], getattr(snapshot, name))
            yield family
        breakers = _breakers(self.policy)
        if breakers:
            state = GaugeMetricFamily("strata_broker_cache_memcached_breaker_open",
                                      "1 while the server's circuit breaker is open (the cache skips it)",
                                      labels=["server"])  # fmt: skip
            trips = CounterMetricFamily("strata_broker_cache_memcached_breaker_trips",
                                        "Times the server's breaker opened", labels=["server"])  # fmt: skip
            for server, b in sorted(breakers.items()):
                state.add_metric([server], 1.0 if b["state"] == "open" else 0.0)
                trips.add_metric([server], b["trips"])
            yield state
            yield trips
        for name, doc in (("entries", "Entries held"), ("bytes", "Bytes held")):
            gauge = GaugeMetricFamily(f"strata_broker_cache_backend_{name}", doc, labels=["level"])
            for level, snapshot in levels.items():
                gauge.add_metric([level], getattr(snapshot, name))
            yield gauge


def druid_cache_collector(policy: SegmentCache) -> DruidCacheCollector:
    """Druid's `druid_query_cache_*` gauges over the whole backend (both levels of a hybrid)."""
    return DruidCacheCollector(lambda: backend_levels(policy)["all"], lambda: policy.stats["puts"])
