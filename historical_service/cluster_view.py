"""What this historical sees of its peers: who is live (membership, with each one's tier) and who
serves what.

`ZkClusterView` reads `/announcements` (live historicals and their tiers) and `/segments` (served
segments) with the announcer's kazoo client; a ChildrenWatch on `/announcements` only wakes the control loop,
which then reads the latest state itself, so coalesced or missed watch events never matter.
`StaticClusterView` is the no-ZooKeeper mode: this node alone, every segment is its own.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from strata.discovery import ServerMetadata, ServerType, ZkPaths, parse_batch
from strata.discovery.server_metadata import DEFAULT_TIER

if TYPE_CHECKING:
    from kazoo.client import KazooClient

log = logging.getLogger(__name__)


class ClusterView(Protocol):
    async def live_historicals(self) -> dict[str, str]:
        """Live historical -> its tier."""
        ...

    async def served_by(self) -> dict[str, set[str]] | None:
        """Server -> segment ids it announces; None when unknown (no ZooKeeper)."""
        ...


class StaticClusterView:
    def __init__(self, servers: set[str] | Mapping[str, str]):
        self.servers = dict(servers) if isinstance(servers, Mapping) else dict.fromkeys(servers, DEFAULT_TIER)

    async def live_historicals(self) -> dict[str, str]:
        return dict(self.servers)

    async def served_by(self) -> dict[str, set[str]] | None:
        return None


class ZkClusterView:
    def __init__(self, zk: Callable[[], KazooClient], paths: ZkPaths):
        self._zk = zk
        self.paths = paths
        self._watch: Any = None

    def watch(self, on_change: Callable[[], None]) -> None:
        """Call `on_change` (from a kazoo thread) whenever the set of announced servers changes."""
        from kazoo.recipe.watchers import ChildrenWatch

        zk = self._zk()
        zk.retry(zk.ensure_path, self.paths.announcements)

        def changed(_children: list[str]) -> None:
            on_change()

        self._watch = ChildrenWatch(zk, self.paths.announcements, changed)

    async def live_historicals(self) -> dict[str, str]:
        return await asyncio.to_thread(self._read_live)

    async def served_by(self) -> dict[str, set[str]] | None:
        return await asyncio.to_thread(self._read_served)

    def _read_live(self) -> dict[str, str]:
        from kazoo.exceptions import NoNodeError

        zk = self._zk()
        live = {}
        for name in zk.retry(zk.get_children, self.paths.announcements):
            try:
                data, _ = zk.retry(zk.get, self.paths.announcement(name))
                server = ServerMetadata.from_bytes(data)
                if server.type == ServerType.HISTORICAL:
                    live[name] = server.tier
            except NoNodeError:
                continue  # left while we read
            except ValueError as e:
                log.warning("ignoring announcement %s: %s", name, e)
        return live

    def _read_served(self) -> dict[str, set[str]]:
        from kazoo.exceptions import NoNodeError

        zk = self._zk()
        served: dict[str, set[str]] = {}
        try:
            servers = zk.retry(zk.get_children, self.paths.segments)
        except NoNodeError:
            return served
        for server in servers:
            ids = served.setdefault(server, set())
            folder = self.paths.server_segments(server)
            try:
                batches = zk.retry(zk.get_children, folder)
            except NoNodeError:
                continue
            for batch in batches:
                try:
                    data, _ = zk.retry(zk.get, f"{folder}/{batch}")
                    ids.update(s.id for s in parse_batch(data))
                except NoNodeError:
                    continue
                except ValueError as e:
                    log.warning("ignoring batch %s/%s: %s", server, batch, e)
        return served
