"""Where the coordinator-overlord is, and the broker's pass-through to it.

The broker learns the coordinator's address from `--coordinator HOST:PORT`, or, with `--zk`, from
the coordinator's announcement (`<base>/internal-discovery/OVERLORD/<host:port>`, as Druid's nodes
find their overlord). It then relays `/druid/indexer/v1/*` and `/druid/coordinator/v1/*` to it as
Druid's router does, so a client (the console's Ingestion page, a curl script) needs the broker's
address only. The request goes on with its credentials; the coordinator authorizes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from typing import Any

import httpx
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from strata.discovery import ZkPaths, make_kazoo_client
from strata.discovery.druid_node import node_address
from strata.query.errors import ServiceUnavailable

log = logging.getLogger(__name__)

PASSED_HEADERS = ("authorization", "content-type", "accept")
UNKNOWN = (
    "No coordinator-overlord is known to this broker: start it with --coordinator HOST:PORT, or --zk "
    "where the coordinator announces itself"
)
TIMEOUT_S = 60.0


class CoordinatorUnknown(ServiceUnavailable):
    """No coordinator-overlord to relay to."""


class CoordinatorLink:
    def __init__(self, fixed: str | None = None, zk: str | None = None, zk_base: str = "/druid",
                 tls_ca: str | None = None) -> None:  # fmt: skip
        self._fixed = fixed.removeprefix("http://").removeprefix("https://").rstrip("/") if fixed else None
        self._zk_hosts = zk if not fixed else None
        self._paths = ZkPaths(zk_base)
        self._found: str | None = None
        self._lock = threading.Lock()
        self._zk: Any = None
        self._scheme = "https" if tls_ca else "http"
        self._client = httpx.AsyncClient(timeout=TIMEOUT_S, verify=tls_ca or True)

    @property
    def address(self) -> str | None:
        return self._fixed or self._found

    async def start(self) -> None:
        if self._zk_hosts:
            try:
                await asyncio.to_thread(self._watch)
            except Exception as e:  # queries go on; the task pages say the coordinator is unknown
                log.warning("cannot watch ZooKeeper for the coordinator: %s", e)

    def _watch(self) -> None:
        from kazoo.recipe.watchers import ChildrenWatch

        assert self._zk_hosts is not None
        zk = self._zk = make_kazoo_client(self._zk_hosts)
        zk.start(timeout=15)
        parent = self._paths.node_role("OVERLORD")
        zk.ensure_path(parent)

        def changed(children: list[str]) -> None:
            self._settle(self._announced(children))

        ChildrenWatch(zk, parent, changed)

    def _announced(self, children: list[str]) -> str | None:
        parent, found = self._paths.node_role("OVERLORD"), None
        for child in sorted(children):
            with contextlib.suppress(Exception):
                data, _ = self._zk.get(f"{parent}/{child}")
                found = node_address(data) or found
        return found

    def _settle(self, found: str | None) -> None:
        with self._lock:
            if found != self._found:
                log.info("coordinator-overlord %s", f"at {found}" if found else "gone from ZooKeeper")
            self._found = found

    def _look_now(self) -> str | None:
        """Read the announcements directly: a coordinator that has just announced itself is
        found before the watch's notice arrives (a request right after the coordinator started)."""
        if self._zk is None or not self._zk.connected:
            return None
        try:
            children = self._zk.get_children(self._paths.node_role("OVERLORD"))
        except Exception as e:
            log.warning("cannot read the coordinator's announcement: %s", e)
            return None
        found = self._announced(children)
        if found is not None:
            self._settle(found)
        return found

    async def _address(self) -> str:
        address = self.address
        if address is None:
            address = await asyncio.to_thread(self._look_now)
        if address is None:
            raise CoordinatorUnknown(UNKNOWN)
        return address

    async def stop(self) -> None:
        await self._client.aclose()
        if self._zk is not None:
            zk = self._zk

            def close() -> None:
                with contextlib.suppress(Exception):
                    zk.stop()
                    zk.close()

            await asyncio.to_thread(close)

    async def post(self, path: str, body: bytes, headers: dict[str, str]) -> httpx.Response:
        """A request of the broker's own to the coordinator (a SQL task's submission)."""
        address = await self._address()
        try:
            return await self._client.post(f"{self._scheme}://{address}{path}", content=body, headers=headers)
        except httpx.HTTPError as e:
            raise CoordinatorUnknown(f"The coordinator-overlord at {address} is unreachable: {e}") from None

    async def relay(self, request: Request) -> Response:
        address = await self._address()
        url = f"{self._scheme}://{address}{request.url.path}"
        headers = {k: v for k, v in request.headers.items() if k.lower() in PASSED_HEADERS}
        try:
            answer = await self._client.request(
                request.method, url, params=list(request.query_params.multi_items()),
                content=await request.body(), headers=headers,
            )  # fmt: skip
        except httpx.HTTPError as e:
            raise CoordinatorUnknown(f"The coordinator-overlord at {address} is unreachable: {e}") from None
        kept = {k: v for k, v in answer.headers.items() if k.lower() in ("content-type", "www-authenticate")}
        return Response(answer.content, answer.status_code, headers=kept)


def coordinator_of(request: Request) -> CoordinatorLink:
    link: CoordinatorLink | None = getattr(request.app.state, "coordinator_link", None)
    if link is None:
        raise CoordinatorUnknown(UNKNOWN)
    return link


async def relay(request: Request) -> Response:
    return await coordinator_of(request).relay(request)


_METHODS = ["GET", "POST", "DELETE"]
COORDINATOR_ROUTES = [
    Route("/druid/indexer/v1/{rest:path}", relay, methods=_METHODS),
    Route("/druid/coordinator/v1/{rest:path}", relay, methods=_METHODS),
]
