"""One broker process's state: settings, server view, node client, runner, caches, metrics.

Kept apart from the HTTP shell (broker_service.app) so the modules that take a Broker (the SQL API,
streamed Arrow scans) import it without importing the routes that import them.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from broker_service.admission import Admission
from broker_service.answer_memo import AnswerMemo
from broker_service.cache_status import CacheCollector, druid_cache_collector
from broker_service.data_node_client import DataNodeClient
from broker_service.inventory.base import ServerInventory
from broker_service.laning import Laning
from broker_service.merge_processes import MergeProcesses
from broker_service.metrics import BrokerMetrics
from broker_service.query_bodies import ParsedBodies
from broker_service.query_runner import QueryRunner, RunnerLimits
from broker_service.relational_engine import EngineSlots
from broker_service.result_cache import ResultLevelCache
from broker_service.scan_types import SegmentColumnTypes
from broker_service.segment_cache import SegmentCache
from broker_service.server_view import BrokerServerView
from strata.query.duck import EngineLimits
from strata.server.druid_metrics import SegmentCountCollector
from strata.server.loop_lag import LoopLag
from strata.server.memory_release import MemoryRelease
from strata.sql.subquery_limits import DEFAULT_MAX_SUBQUERY_ROWS

MAX_REQUEST_BYTES = 8 * 1024 * 1024


@dataclass
class BrokerSettings:
    host: str = "127.0.0.1:8082"  # reported in error bodies
    max_concurrent_queries: int = 32
    query_queue: int = 64
    max_request_bytes: int = MAX_REQUEST_BYTES
    merge_threads: int = 4
    merge_processes: int = 0  # worker processes for large merges (0: in threads here; the CLI starts 1)
    merge_process_rows: int = 50_000  # partial rows from which a merge goes to a worker process
    limits: RunnerLimits = field(default_factory=RunnerLimits)
    laning: Laning = field(default_factory=Laning)  # Druid's query lanes within the capacity
    # the relational stage of SQL statements (strata.sql.sandbox): no file, extension or network access
    engine: EngineLimits = field(default_factory=lambda: EngineLimits(external_access=False))
    max_subquery_rows: int = DEFAULT_MAX_SUBQUERY_ROWS  # a statement's maxSubqueryRows by default
    max_subquery_bytes: int | None = None  # the most any statement's subqueries hand it (None: a
    # quarter of the engine's query memory: JSON decoded to Python values takes several times its size)
    release_memory_s: float = 10.0  # how often freed memory is checked for and given back (0: never)

    @property
    def subquery_bytes_ceiling(self) -> int:
        return self.max_subquery_bytes or self.engine.query_memory // 4


class Broker:
    """Everything one broker process holds; built once, torn down by the app's lifespan."""

    def __init__(
        self,
        settings: BrokerSettings,
        view: BrokerServerView,
        inventory: ServerInventory | None,
        *,
        cache_policy: Any = None,
        cache_kind: str = "none",
        result_cache: ResultLevelCache | None = None,
        node_headers: Mapping[str, str] | None = None,  # the internal identity, for data nodes
        tls_ca: str | None = None,  # data nodes serve HTTPS with certificates from this CA
    ):
        self.settings = settings
        self.view = view
        self.inventory = inventory
        self.metrics = BrokerMetrics()
        self.metrics.serves = view.serves
        self.parsed_bodies = ParsedBodies()
        self.client = DataNodeClient(headers=node_headers, tls_ca=tls_ca)
        self.merge_pool = ThreadPoolExecutor(max_workers=settings.merge_threads, thread_name_prefix="merge")
        self.merge_processes = (
            MergeProcesses(settings.merge_processes, settings.merge_process_rows)
            if settings.merge_processes
            else None
        )
        self.runner = QueryRunner(
            view,
            self.client,
            merge_pool=self.merge_pool,
            merge_processes=self.merge_processes,
            cache_policy=cache_policy,
            result_cache=result_cache,
            limits=settings.limits,
            metrics=self.metrics,
        )
        self.relational = EngineSlots(settings.engine)
        self.admission = Admission(settings.max_concurrent_queries, settings.query_queue, settings.laning)
        self.metrics.bind_refusals(self.admission.refusals.by_lane)
        self.metrics.bind_gauges(
            segments=lambda: view.segment_count,
            servers=lambda: len(view.servers()),
            connected=lambda: 1.0 if inventory is None or inventory.status().connected else 0.0,
            running=lambda: self.admission.running,
            queued=lambda: self.admission.queued,
            lost=lambda: view.lost_segment_count,
        )
        self.cache_kind = cache_kind
        # whole answers by raw request body, beside the result-level cache (broker_service.fast_path)
        self.answer_memo = AnswerMemo() if result_cache is not None else None
        self.scan_types = SegmentColumnTypes()  # for streamed Arrow scans
        self.segment_cache = cache_policy if isinstance(cache_policy, SegmentCache) else None
        per_source = lambda: Counter(s.segment.data_source for s in view.selectors())  # noqa: E731
        self.metrics.bind_cache(SegmentCountCollector(per_source))
        if self.segment_cache is not None:
            self.metrics.bind_cache(CacheCollector(self.segment_cache, result_cache))
            self.metrics.bind_cache(druid_cache_collector(self.segment_cache))
            view.on_segment_removed(self.segment_cache.forget_segment)
        release_s = settings.release_memory_s  # allocators' high-water marks given back
        # a release locks the allocator's arenas: it waits (a period at most) for no urgent query
        quiet = lambda: self.admission.urgent_running == 0  # noqa: E731
        self.memory_release = MemoryRelease(release_s, quiet=quiet) if release_s > 0 else None
        self.loop_lag = LoopLag(self.metrics.loop_lag.observe)
        self.started = time.time()

    async def start(self) -> None:
        self.loop_lag.start()
        if self.inventory is not None:
            await self.inventory.start()
        if self.memory_release is not None:
            self.memory_release.start()
        if self.merge_processes is not None:
            await self.merge_processes.warm()

    async def stop(self) -> None:
        await self.loop_lag.stop()
        if self.memory_release is not None:
            await self.memory_release.stop()
        if self.inventory is not None:
            await self.inventory.stop()
        await self.client.close()
        self.merge_pool.shutdown(wait=False, cancel_futures=True)
        self.relational.close()
        if self.merge_processes is not None:
            self.merge_processes.shutdown()
