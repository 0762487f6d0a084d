"""The historical's HTTP app: status, readiness, metrics, the segment change feed, the query API.

The lifespan wires the pieces: metadata store, loader, announcers (HTTP change feed always,
ZooKeeper when configured), cluster view and the control loop; on shutdown it stops the loop and
closes the ZooKeeper session, which removes every announcement of this node at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from historical_service.cluster_view import ClusterView, StaticClusterView, ZkClusterView
from historical_service.control_loop import ControlLoop
from historical_service.loader import SegmentLoader
from historical_service.metrics import HistoricalMetrics
from historical_service.query_routes import add_query_routes
from strata.data_node.announcer import (
    CompositeAnnouncer,
    SegmentAnnouncer,
    ZkAnnouncer,
    leave,
    reconcile_forever,
)
from strata.data_node.change_feed import ChangeHistory, change_feed_route
from strata.data_node.served import ServedSegments
from strata.data_node.status_routes import node_status_routes
from strata.discovery import ServerMetadata, ServerType, ZkPaths
from strata.server.json_response import druid_error_handlers
from strata.server.json_response import json_response as _json

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class HistoricalConfig:
    name: str  # host:port this node is reached at and announced as
    deep_storage: str | Path  # a directory, file://DIR or s3://BUCKET/PREFIX
    metadata: str
    segment_cache: Path
    zk: str | None = None
    zk_base: str = "/druid"
    tier: str = "_default_tier"
    priority: int = 0
    max_size: int = 0
    replicas: int = 2
    poll_period_s: float = 5.0
    drop_delay_s: float = 30.0  # files of a dropped segment outlive queries already running on it
    zk_session_timeout_s: float = 10.0
    server_type: ServerType = ServerType.HISTORICAL
    segment_cache_format: str = "arrow"  # "parquet": queries decode the deep-storage files instead
    s3_endpoint: str | None = None  # an S3-compatible store's endpoint (deep_storage s3://...)
    s3_region: str | None = None


@dataclass
class HistoricalState:
    config: HistoricalConfig
    metrics: HistoricalMetrics = field(default_factory=HistoricalMetrics)
    served: ServedSegments = field(default_factory=ServedSegments)
    history: ChangeHistory = field(default_factory=ChangeHistory)
    zk_announcer: ZkAnnouncer | None = None
    control: ControlLoop | None = None
    query_endpoint: Any = None
    background: list[asyncio.Task[None]] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def server(self) -> ServerMetadata:
        c = self.config
        return ServerMetadata(c.name, c.name, c.server_type, c.tier, c.priority, c.max_size)


def _status_routes(state: HistoricalState) -> list[BaseRoute]:
    def strata() -> dict[str, Any]:
        control = state.control
        return {
            "name": state.name,
            "type": "historical",
            "segments": len(state.served),
            "assigned": len(control.assigned) if control else 0,
            "failedLoads": len(control.loader.failures) if control else 0,
            "loadFailures": control.loader.failure_report() if control else [],
            "tier": state.config.tier,
            "members": sorted(control.members) if control else [],
            "zookeeper": state.config.zk is not None,
            "zkReannouncements": state.zk_announcer.resyncs if state.zk_announcer else 0,
        }

    def ready() -> bool:
        return state.control is not None and state.control.ready

    async def readiness(request: Request) -> Response:
        ok = ready()
        return _json(ok, 200 if ok else 503)

    async def load_status(request: Request) -> Response:
        return _json({"cacheInitialized": state.control is not None and state.control.passes > 0})

    return [
        *node_status_routes(strata, ready, lambda: state.metrics.registry),
        Route("/druid/historical/v1/loadstatus", load_status),
        Route("/druid/historical/v1/readiness", readiness),
    ]


@contextlib.asynccontextmanager
async def _lifespan(state: HistoricalState) -> AsyncIterator[None]:
    from strata.storage import open_deep_storage, open_metadata_store

    c = state.config
    metadata = await asyncio.to_thread(open_metadata_store, c.metadata)
    arrow = c.segment_cache_format == "arrow"
    deep = open_deep_storage(c.deep_storage, s3_endpoint=c.s3_endpoint, s3_region=c.s3_region)
    loader = SegmentLoader(c.segment_cache, deep, arrow=arrow)
    targets: list[SegmentAnnouncer] = [state.history]
    cluster: ClusterView = StaticClusterView({c.name})
    zk_view: ZkClusterView | None = None
    if c.zk:
        paths = ZkPaths(c.zk_base)
        announcer = ZkAnnouncer(c.zk, paths, state.server, session_timeout_s=c.zk_session_timeout_s)
        await announcer.start()
        state.zk_announcer = announcer
        targets.append(announcer)
        zk_view = ZkClusterView(lambda: announcer.zk, paths)
        cluster = zk_view
    control = ControlLoop(
        name=c.name, metadata=metadata, loader=loader, announcer=CompositeAnnouncer(targets),
        served=state.served, cluster=cluster, metrics=state.metrics, replicas=c.replicas,
        poll_period_s=c.poll_period_s, drop_delay_s=c.drop_delay_s, tier=c.tier,
        rules=_rules_reader(metadata),
    )  # fmt: skip
    state.control = control
    task = asyncio.create_task(control.run(), name="historical-control-loop")
    await asyncio.sleep(0)  # let run() record its loop before notifications arrive
    metadata.subscribe(control.wake_threadsafe)  # PostgreSQL NOTIFY on a publish; SQLite: polling
    if zk_view is not None:
        await asyncio.to_thread(zk_view.watch, control.wake_threadsafe)
    state.background = [task]
    if state.zk_announcer is not None:
        reconcile = reconcile_forever(state.zk_announcer)
        state.background.append(asyncio.create_task(reconcile, name="zk-reconcile"))
    log.info("historical %s started (zk=%s, tier=%s, replicas=%d)", c.name, c.zk or "off", c.tier, c.replicas)
    try:
        yield
    finally:
        await leave_cluster(state)
        loader.close()
        await asyncio.to_thread(metadata.close)
        log.info("historical %s stopped", c.name)


def _rules_reader(metadata: Any) -> Callable[[], dict[str, Any]]:
    """The rules in force, read through a rule store opened on first use (and again after a failure)."""
    from strata.storage.rule_store import RuleStore

    store: list[RuleStore] = []

    def read() -> dict[str, Any]:
        if not store:
            store.append(RuleStore(metadata))
        return dict(store[0].current())

    return read


async def leave_cluster(state: HistoricalState) -> None:
    """Stop loading and announcing, then leave ZooKeeper (see `strata.data_node.announcer.leave`)."""
    state.history.close()
    await leave(state.background, state.zk_announcer)


def create_app(config: HistoricalConfig) -> Starlette:
    state = HistoricalState(config)
    state.metrics.bind_segment_counts(lambda: Counter(s.data_source for s in state.served.segments()))
    routes: list[BaseRoute] = [*_status_routes(state), change_feed_route(state.history)]
    add_query_routes(routes, state)
    app = Starlette(
        routes=routes,
        lifespan=lambda _app: _lifespan(state),
        exception_handlers=druid_error_handlers(config.name),
    )
    app.state.historical = state
    return app
