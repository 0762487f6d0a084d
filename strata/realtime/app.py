"""The real-time node's HTTP app: push ingestion, the shared query API, change feed, status, metrics.

The lifespan recovers (checkpoint + log replay) before the first request, announces the live
segments (HTTP change feed always, ZooKeeper when configured) with server type `realtime`, and
runs the clock that persists and hands off. Shutdown leaves ZooKeeper first, then closes the log.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, Gauge
from starlette.applications import Starlette
from starlette.routing import BaseRoute

from strata.data_node.announcer import (
    CompositeAnnouncer,
    SegmentAnnouncer,
    ZkAnnouncer,
    leave,
    reconcile_forever,
)
from strata.data_node.change_feed import ChangeHistory, change_feed_route
from strata.data_node.query_api import QueryEndpoint
from strata.data_node.served import ServedSegments
from strata.data_node.status_routes import node_status_routes
from strata.discovery import ServerMetadata, ServerType, ZkPaths
from strata.realtime.ingest_metrics import IngestCollector
from strata.realtime.node import RealtimeNode
from strata.realtime.push_api import PushEndpoint
from strata.realtime.spec import RealtimeSpec
from strata.server.druid_metrics import (
    DruidQueryMetrics,
    SegmentCountCollector,
    add_process_metrics,
    outcome_of,
)
from strata.server.json_response import druid_error_handlers

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RealtimeConfig:
    name: str  # host:port, as announced
    spec: RealtimeSpec
    base_dir: Path
    deep_storage: str | Path  # a directory, file://DIR or s3://BUCKET/PREFIX
    metadata: str
    zk: str | None = None
    zk_base: str = "/druid"
    tier: str = "_default_tier"
    priority: int = 0
    drop_delay_s: float = 30.0
    zk_session_timeout_s: float = 10.0
    s3_endpoint: str | None = None  # an S3-compatible store's endpoint (deep_storage s3://...)
    s3_region: str | None = None

    @property
    def server(self) -> ServerMetadata:
        return ServerMetadata(self.name, self.name, ServerType.REALTIME, self.tier, self.priority, 0)


@dataclass
class RealtimeState:
    config: RealtimeConfig
    served: ServedSegments = field(default_factory=ServedSegments)
    history: ChangeHistory = field(default_factory=ChangeHistory)
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)
    node: RealtimeNode | None = None
    push: PushEndpoint | None = None
    zk_announcer: ZkAnnouncer | None = None
    background: list[asyncio.Task[None]] = field(default_factory=list)


def _bind_metrics(state: RealtimeState, endpoint: QueryEndpoint) -> None:
    r = state.registry
    druid = DruidQueryMetrics(r, broker=False)
    add_process_metrics(r)
    r.register(SegmentCountCollector(lambda: Counter(s.data_source for s in state.served.segments())))
    endpoint.on_query = lambda ds, t, s, status: druid.on_query(ds, t, s, outcome_of(status))
    endpoint.on_segments = druid.on_segments

    def gauge(name: str, doc: str, read: Callable[[RealtimeNode], float]) -> None:
        Gauge(name, doc, registry=r).set_function(lambda: float(read(state.node)) if state.node else 0.0)

    gauge("strata_realtime_rows_in_memory", "Rows held in memory", lambda n: n.index.rows_in_memory())
    gauge("strata_realtime_bytes_in_memory", "Bytes held in memory", lambda n: n.index.bytes_in_memory())
    gauge(
        "strata_realtime_wal_syncs",
        "Group commits (fsyncs) of the write-ahead log",
        lambda n: n.wal.syncs,
    )
    gauge(
        "strata_realtime_wal_records",
        "Records written to the write-ahead log",
        lambda n: n.wal.records,
    )
    gauge("strata_realtime_persists", "Intermediate persists", lambda n: n.stats.persists)
    gauge("strata_realtime_handoffs", "Segments handed off", lambda n: n.stats.handoffs)
    events = Gauge("strata_realtime_events", "Pushed events by outcome", ["outcome"], registry=r)
    for key in ("received", "accepted", "unparseable", "thrownAway", "duplicates", "rejected"):
        events.labels(key).set_function(partial(_event_count, state, key))
    r.register(IngestCollector(lambda: state.node.spec.data_source if state.node else None,
                               partial(_ingest_counts, state)))  # fmt: skip


def _ingest_counts(state: RealtimeState) -> dict[str, float]:
    counts: dict[str, float] = dict(state.push.counts) if state.push else {}
    if state.node is not None:
        counts["persists"] = state.node.stats.persists
        counts["handoffs"] = state.node.stats.handoffs
    return counts


def _event_count(state: RealtimeState, key: str) -> float:
    return float(state.push.counts[key]) if state.push else 0.0


def _status_routes(state: RealtimeState) -> list[BaseRoute]:
    def strata() -> dict[str, Any]:
        c, node = state.config, state.node
        body: dict[str, Any] = {"name": c.name, "type": "realtime", "segments": len(state.served),
                                "zookeeper": c.zk is not None}  # fmt: skip
        if node is not None:
            wal = node.wal
            body["ingestion"] = {
                **node.index.status(),
                "events": dict(state.push.counts) if state.push else {},
                "wal": {"nextLsn": wal.next_lsn, "syncs": wal.syncs, "records": wal.records,
                        "syncSeconds": round(wal.sync_seconds, 6), "files": len(wal.file_max_lsn)},
                "persists": node.stats.persists, "persistFailures": node.stats.persist_failures,
                "handoffs": node.stats.handoffs, "lastError": node.stats.last_error,
            }  # fmt: skip
        return body

    return node_status_routes(strata, lambda: state.node is not None, lambda: state.registry)


@contextlib.asynccontextmanager
async def _lifespan(state: RealtimeState) -> AsyncIterator[None]:
    from strata.storage import open_deep_storage, open_metadata_store

    c = state.config
    store = await asyncio.to_thread(open_metadata_store, c.metadata)
    targets: list[SegmentAnnouncer] = [state.history]
    paths = ZkPaths(c.zk_base)
    if c.zk:
        announcer = ZkAnnouncer(c.zk, paths, c.server, session_timeout_s=c.zk_session_timeout_s)
        await announcer.start()
        state.zk_announcer = announcer
        targets.append(announcer)
    zk = state.zk_announcer
    node = RealtimeNode(
        c.spec,
        c.base_dir,
        state.served,
        CompositeAnnouncer(targets),
        open_deep_storage(c.deep_storage, s3_endpoint=c.s3_endpoint, s3_region=c.s3_region),
        store,
        zk=(lambda: zk.zk) if zk is not None else None,
        zk_paths=paths if zk is not None else None,
        drop_delay_s=c.drop_delay_s,
    )
    await node.start()
    state.node = node
    assert state.push is not None
    state.push.node = node
    state.background = [asyncio.create_task(node.tick_forever(), name="realtime-clock")]
    if state.zk_announcer is not None:
        state.background.append(
            asyncio.create_task(reconcile_forever(state.zk_announcer), name="zk-reconcile")
        )
    log.info("real-time node %s ingesting %s (zk=%s)", c.name, c.spec.data_source, c.zk or "off")
    try:
        yield
    finally:
        await leave_cluster(state)
        await node.stop()
        await asyncio.to_thread(store.close)
        log.info("real-time node %s stopped", c.name)


async def leave_cluster(state: RealtimeState) -> None:
    """Stop the clock, then leave ZooKeeper (see `strata.data_node.announcer.leave`)."""
    state.history.close()
    await leave(state.background, state.zk_announcer)


def create_app(config: RealtimeConfig) -> Starlette:
    state = RealtimeState(config)
    query = QueryEndpoint(state.served, config.name)
    _bind_metrics(state, query)
    push = PushEndpoint(None, config.name)  # type: ignore[arg-type]  # the node exists once the lifespan ran
    state.push = push
    routes: list[BaseRoute] = [
        *_status_routes(state),
        change_feed_route(state.history),
        *query.routes(),
        *push.routes(),
    ]
    app = Starlette(
        routes=routes,
        lifespan=lambda _app: _lifespan(state),
        exception_handlers=druid_error_handlers(config.name),
    )
    app.state.realtime = state
    return app
