"""Segment inventory from each data node's HTTP change feed (no ZooKeeper needed).

Per node, one long-polling follower: `counter=-1` gets a full snapshot (full sync), later calls
pass the last counter and get deltas, an empty/204 answer means "nothing changed", and
`resetCounter` starts over with a full sync. A node that cannot be reached is marked down and its
segments leave the view at once (queries go to replicas); the follower retries with exponential
backoff and full-syncs when the node is back.
"""

from __future__ import annotations

import asyncio
import logging
import random
import ssl
import time
from collections.abc import Mapping, Sequence

import httpx
import orjson

from broker_service.inventory.base import InventoryStatus, ServerInventory
from broker_service.server_view import BrokerServerView
from strata.discovery import ChangeCounter, ChangeRequestsSnapshot
from strata.discovery.server_metadata import ServerMetadata, ServerType

log = logging.getLogger(__name__)

FEED_PATH = "/druid-internal/v1/segments"


def parse_node(text: str) -> ServerMetadata:
    """`HOST:PORT` (a historical) or `HOST:PORT/TYPE` (e.g. `127.0.0.1:8100/realtime`)."""
    address, _, kind = text.strip().partition("/")
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"node must be HOST:PORT[/TYPE], got {text!r}")
    return ServerMetadata(name=address, host=address, type=ServerType.parse(kind or "historical"))


class _NodeState:
    def __init__(self, server: ServerMetadata):
        self.server = server
        self.up = False
        self.counter: ChangeCounter | None = None
        self.failures = 0
        self.last_error: str | None = None
        self.last_sync: float | None = None
        self.attempted = False


class HttpInventory(ServerInventory):
    def __init__(
        self,
        view: BrokerServerView,
        nodes: Sequence[ServerMetadata],
        *,
        server_timeout_ms: int = 30_000,
        max_backoff_s: float = 30.0,
        initial_backoff_s: float = 0.2,
        headers: Mapping[str, str] | None = None,  # the internal identity, for the nodes' feeds
        tls_ca: str | None = None,  # the nodes serve HTTPS with certificates from this CA
    ):
        self._headers = dict(headers or {})
        self._tls_ca = tls_ca
        self.view = view
        self.server_timeout_ms = server_timeout_ms
        self.max_backoff_s = max_backoff_s
        self.initial_backoff_s = initial_backoff_s
        self._nodes = {n.name: _NodeState(n) for n in nodes}
        self._tasks: list[asyncio.Task[None]] = []
        self._client: httpx.AsyncClient | None = None
        self._outages = 0

    async def start(self) -> None:
        self._client = httpx.AsyncClient(
            timeout=httpx.Timeout(self.server_timeout_ms / 1000 + 5, connect=5.0),
            limits=httpx.Limits(max_connections=max(10, 2 * len(self._nodes))),
            headers=self._headers,
            verify=ssl.create_default_context(cafile=self._tls_ca) if self._tls_ca else True,
        )
        for state in self._nodes.values():
            self._tasks.append(asyncio.create_task(self._follow(state), name=f"feed:{state.server.name}"))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    def status(self) -> InventoryStatus:
        nodes = {
            name: {
                "up": s.up,
                "counter": s.counter.counter if s.counter else None,
                "failures": s.failures,
                "lastError": s.last_error,
                "segments": len(self.view.segments_of(name)),
            }
            for name, s in self._nodes.items()
        }
        return InventoryStatus(
            kind="http",
            connected=any(s.up for s in self._nodes.values()) or not self._nodes,
            initialized=all(s.attempted for s in self._nodes.values()),
            last_error=next((s.last_error for s in self._nodes.values() if s.last_error), None),
            outages=self._outages,
            nodes=nodes,
        )

    async def _follow(self, state: _NodeState) -> None:
        backoff = self.initial_backoff_s
        while True:
            try:
                await self._poll_once(state)
                backoff = self.initial_backoff_s
            except asyncio.CancelledError:
                raise
            except Exception as e:  # any failure: node down, keep trying
                self._mark_down(state, e)
                await asyncio.sleep(backoff * (0.5 + random.random()))
                backoff = min(backoff * 2, self.max_backoff_s)

    async def _poll_once(self, state: _NodeState) -> None:
        assert self._client is not None
        params: dict[str, int] = {"timeout": self.server_timeout_ms}
        if state.counter is None:
            params["counter"] = -1
        else:
            params["counter"] = state.counter.counter
            params["hash"] = state.counter.hash
        url = f"{'https' if self._tls_ca else 'http'}://{state.server.host}{FEED_PATH}"
        response = await self._client.get(url, params=params, headers={"Accept": "application/json"})
        state.attempted = True
        if response.status_code == 204 or (response.status_code == 200 and not response.content):
            self._mark_up(state)
            return
        if response.status_code != 200:
            raise RuntimeError(f"change feed answered HTTP {response.status_code}")
        snapshot = ChangeRequestsSnapshot.from_json(orjson.loads(response.content))
        if snapshot.reset_counter:
            log.info("change feed of %s reset (%s): full sync", state.server.name, snapshot.reset_cause)
            state.counter = None
            return
        name = state.server.name
        if state.counter is None:
            self.view.add_server(state.server)
            self.view.sync_server(
                name, [r.segment for r in snapshot.requests if r.action == "load" and r.segment]
            )
        else:
            for request in snapshot.requests:
                if request.segment is None:
                    continue
                if request.action == "drop":
                    self.view.remove_segment(name, request.segment.id)
                elif request.action == "load":
                    self.view.add_segment(name, request.segment)
        state.counter = snapshot.counter
        state.last_sync = time.time()
        self._mark_up(state)

    def _mark_up(self, state: _NodeState) -> None:
        if not state.up:
            log.info("data node %s is up", state.server.name)
        state.up = True
        state.failures = 0
        state.last_error = None

    def _mark_down(self, state: _NodeState, error: BaseException) -> None:
        state.attempted = True
        state.failures += 1
        state.last_error = f"{type(error).__name__}: {error}"
        state.counter = None
        if state.up or state.failures == 1:
            if state.up:
                self._outages += 1
            log.warning("data node %s is down: %s", state.server.name, state.last_error)
            state.up = False
            self.view.remove_server(state.server.name)
