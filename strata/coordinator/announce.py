"""The coordinator's presence in ZooKeeper, as Druid's node discovery has it: ephemeral znodes
`<base>/internal-discovery/COORDINATOR/<host:port>` and `.../OVERLORD/<host:port>` holding a
DiscoveryDruidNode, written again whenever a new session replaces a lost one. A broker started with
`--zk` finds the coordinator there (its task and data-management APIs, its console page).

The same session reads which data servers announce which segments (`served()`), for the `servers`
Druid's data-management API lists beside a segment.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from typing import Any

from strata.discovery import ZkPaths, make_kazoo_client, parse_batch
from strata.discovery.druid_node import discovery_node

log = logging.getLogger("strata.coordinator")

SERVICES = {"COORDINATOR": "druid/coordinator", "OVERLORD": "druid/overlord"}
SERVED_TTL_S = 2.0  # a listing reads the announcements at most this often


class NodeAnnouncer:
    def __init__(self, hosts: str, base: str, host: str, port: int, start_time: str) -> None:
        self.paths = ZkPaths(base)
        self.name = f"{host}:{port}"
        self._nodes = {role: discovery_node(role, host, port, service, start_time)
                       for role, service in SERVICES.items()}  # fmt: skip
        self._zk = make_kazoo_client(hosts)
        self._lost = False
        self._served: tuple[float, dict[str, list[str]]] = (0.0, {})
        self._served_lock = threading.Lock()

    async def start(self) -> None:
        await asyncio.to_thread(self._start)

    def _start(self) -> None:
        self._zk.add_listener(self._on_state)
        self._zk.start(timeout=15)
        self._write()

    def _on_state(self, state: str) -> None:
        """kazoo's listener must not block: the rewrite runs on a thread of its own."""
        if state == "LOST":
            self._lost = True
        elif state == "CONNECTED" and self._lost:
            self._lost = False
            threading.Thread(target=self._write, name="coordinator-announce", daemon=True).start()

    def _write(self) -> None:
        from kazoo.exceptions import NodeExistsError

        zk: Any = self._zk
        for role, data in self._nodes.items():
            path = self.paths.node(role, self.name)
            try:
                zk.retry(zk.create, path, data, ephemeral=True, makepath=True)
            except NodeExistsError:  # left by a previous session of this same address: ours to replace
                with contextlib.suppress(Exception):
                    zk.retry(zk.delete, path)
                zk.retry(zk.create, path, data, ephemeral=True, makepath=True)
        log.info("announced in ZooKeeper as coordinator and overlord %s", self.name)

    def served(self) -> dict[str, list[str]]:
        """Segment id -> the data servers announcing it (blocking; read again after SERVED_TTL_S)."""
        with self._served_lock:
            at, known = self._served
            if time.monotonic() - at < SERVED_TTL_S:
                return known
            zk: Any = self._zk
            out: dict[str, list[str]] = {}
            servers = zk.retry(zk.get_children, self.paths.segments) if zk.exists(self.paths.segments) else []
            for server in sorted(servers):
                for batch in zk.retry(zk.get_children, self.paths.server_segments(server)):
                    try:
                        data, _ = zk.retry(zk.get, self.paths.batch(server, batch))
                    except Exception:  # a batch gone between the listing and the read
                        continue
                    for segment in parse_batch(data, compact=True):
                        out.setdefault(segment.id, []).append(server)
            self._served = (time.monotonic(), out)
            return out

    async def stop(self) -> None:
        """Close the session: ZooKeeper removes the znodes at once."""

        def close() -> None:
            with contextlib.suppress(Exception):
                self._zk.stop()
                self._zk.close()

        await asyncio.to_thread(close)
