"""A node's lookups kept in step with the coordinator, and Druid's listen API to inspect them.

Every node that answers queries (broker, historical, real-time) serves one lookup tier
(`--lookup-tier`, Druid's `druid.lookup.lookupTier`, default `__default`). It reads the tier's
lookups from the coordinator, `GET /druid/coordinator/v1/lookups/config/{tier}?detailed=true`, the
call Druid's nodes make at start, and again every `--lookup-poll-period` seconds: a change reaches
every node within one period without the coordinator tracking nodes, and a node that was down
catches up on its first poll. The coordinator, not the metadata store, is asked because it owns
the configuration and its checks, a broker has no metadata store, and it is what Druid users
operate. After each poll the node reports its state (`current`, `toLoad`) to the coordinator
(`POST .../lookups/nodeStatus/{tier}/{host:port}`), which answers `/lookups/status` from those
reports. An unreachable coordinator leaves the loaded lookups as they are.

`GET /druid/listen/v1/lookups` answers Druid's LookupsState, `GET /druid/listen/v1/lookups/{id}`
one lookup's `{"version", "lookupExtractorFactory"}`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from strata.lookups.namespace import DEFAULT_MAX_BYTES
from strata.lookups.registry import REGISTRY, LookupRegistry
from strata.lookups.spec import DEFAULT_TIER, LookupContainer, LookupSpecError, parse_container
from strata.server.json_response import json_response

log = logging.getLogger("strata.lookups")
CONFIG = "/druid/coordinator/v1/lookups"
DEFAULT_POLL_S = 10.0


def add_lookup_flags(parser: argparse.ArgumentParser, *, coordinator_flag: bool) -> None:
    group = parser.add_argument_group("lookups")
    group.add_argument("--lookup-tier", default=DEFAULT_TIER,
                       help="the lookup tier this node loads (Druid's druid.lookup.lookupTier)")  # fmt: skip
    group.add_argument("--lookup-poll-period", type=float, default=DEFAULT_POLL_S,
                       help="seconds between reads of the tier's lookups from the coordinator")  # fmt: skip
    group.add_argument("--lookup-max-bytes", type=int, default=DEFAULT_MAX_BYTES,
                       help="largest lookup file a cachedNamespace lookup may read; past it the "
                            "lookup is not loaded and its status says why")  # fmt: skip
    if coordinator_flag:
        group.add_argument("--coordinator", default=None, metavar="HOST:PORT",
                           help="the coordinator to read lookups from (without it: none)")  # fmt: skip


class LookupSync:
    def __init__(
        self,
        coordinator: Callable[[], str | None],
        tier: str,
        node: str,
        *,
        poll_s: float = DEFAULT_POLL_S,
        registry: LookupRegistry = REGISTRY,
        headers: dict[str, str] | None = None,
        tls_ca: str | None = None,
    ) -> None:
        self._coordinator = coordinator
        self.tier = tier
        self.node = node
        self.poll_s = poll_s
        self.registry = registry
        self._scheme = "https" if tls_ca else "http"
        self._client = httpx.AsyncClient(timeout=10.0, verify=tls_ca or True, headers=headers or {})
        self._task: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()
        self._unreachable = False

    async def start(self) -> None:
        self.registry.refresh = lambda: self.refresh(force=True)
        self._task = asyncio.create_task(self._loop(), name="lookup-sync")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self._client.aclose()

    async def _loop(self) -> None:
        while True:
            try:
                await self.refresh()
            except Exception:  # the loop outlives any one bad poll
                log.exception("lookup poll failed")
            await asyncio.sleep(self.poll_s)

    async def refresh(self, force: bool = False) -> None:
        """One poll: read the tier's lookups, apply them, report the node's state (`force`: re-read
        changed namespace files now)."""
        async with self._lock:
            address = self._coordinator()
            if address is None:
                return
            base = f"{self._scheme}://{address}{CONFIG}"
            configured = await self._read(f"{base}/config/{self.tier}")
            if configured is not None:
                await asyncio.to_thread(lambda: self.registry.sync(configured, force=force))
            with contextlib.suppress(httpx.HTTPError):
                await self._client.post(
                    f"{base}/nodeStatus/{self.tier}/{self.node}", json=self.registry.state()
                )

    async def _read(self, url: str) -> dict[str, LookupContainer] | None:
        try:
            answer = await self._client.get(url, params={"detailed": "true"})
        except httpx.HTTPError as e:
            if not self._unreachable:
                log.warning("cannot read lookups from the coordinator (%s): keeping the loaded ones", e)
            self._unreachable = True
            return None
        self._unreachable = False
        if answer.status_code == 404:  # no lookups configured for the tier (or at all)
            return {}
        if answer.status_code != 200:
            log.warning(
                "the coordinator answered %s to %s: keeping the loaded lookups", answer.status_code, url
            )
            return None
        out: dict[str, LookupContainer] = {}
        for name, value in answer.json().items():
            try:
                out[name] = parse_container(value, f"{self.tier}:{name}")
            except LookupSpecError as e:
                log.error("lookup %s skipped: %s", name, e)
        return out


# -- Druid's listen API --------------------------------------------------------------------------------
async def _all(request: Request) -> Response:
    return json_response(REGISTRY.state())


async def _one(request: Request) -> Response:
    name = request.path_params["id"]
    found = REGISTRY.get(name)
    if found is None:
        return json_response({"error": f"[{name}] not found"}, 404)
    body: dict[str, Any] = found.container.to_json()
    return json_response(body)


LISTEN_ROUTES = [
    Route("/druid/listen/v1/lookups", _all, methods=["GET"]),
    Route("/druid/listen/v1/lookups/{id}", _one, methods=["GET"]),
]


def attach_lookups(app: Starlette, sync: LookupSync | None) -> None:
    """The listen routes on `app` (first, before any catch-all), and `sync` run for its lifetime."""
    app.router.routes[0:0] = LISTEN_ROUTES
    if sync is None:
        return
    inner = app.router.lifespan_context

    @contextlib.asynccontextmanager
    async def lifespan(a: Any) -> AsyncIterator[Any]:
        async with inner(a) as state:
            await sync.start()
            try:
                yield state
            finally:
                await sync.stop()

    app.router.lifespan_context = lifespan


def sync_from_args(
    args: argparse.Namespace,
    node: str,
    coordinator: Callable[[], str | None],
    headers: dict[str, str] | None = None,
    tls_ca: str | None = None,
) -> LookupSync:
    REGISTRY.max_bytes = args.lookup_max_bytes
    return LookupSync(coordinator, args.lookup_tier, node, poll_s=args.lookup_poll_period, headers=headers,
                      tls_ca=tls_ca)  # fmt: skip
