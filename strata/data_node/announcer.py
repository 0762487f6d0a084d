"""Announcing served segments: the `SegmentAnnouncer` interface and its ZooKeeper implementation.

The ZooKeeper announcer keeps the desired state in memory (server metadata + batches) and pushes
only changed batch znodes. Any write that fails (connection loss past the retries, session expiry)
marks the state dirty; the whole state is written again when the session is back (kazoo reports
LOST then CONNECTED with a new session, whose ephemerals are gone) or at the next `reconcile()`.
kazoo calls run in worker threads (`asyncio.to_thread`) or kazoo's own threads, never on the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from strata.data_node.batch_set import BatchSet
from strata.discovery import BatchLimits, ServerMetadata, ZkPaths, batch_znode_name, make_kazoo_client
from timeline import DataSegment

if TYPE_CHECKING:
    from kazoo.client import KazooClient

log = logging.getLogger(__name__)


class SegmentAnnouncer(Protocol):
    async def announce(self, segments: Sequence[DataSegment]) -> None: ...

    async def unannounce(self, segments: Sequence[DataSegment]) -> None: ...


class CompositeAnnouncer:
    """Announces to every target in order (e.g. the HTTP change feed and ZooKeeper)."""

    def __init__(self, targets: Sequence[SegmentAnnouncer]):
        self.targets = list(targets)

    async def announce(self, segments: Sequence[DataSegment]) -> None:
        for target in self.targets:
            await target.announce(segments)

    async def unannounce(self, segments: Sequence[DataSegment]) -> None:
        for target in self.targets:
            await target.unannounce(segments)


class ZkAnnouncer:
    def __init__(
        self,
        hosts: str,
        paths: ZkPaths,
        server: ServerMetadata,
        *,
        limits: BatchLimits | None = None,
        client_factory: Callable[[str], KazooClient] | None = None,
        session_timeout_s: float = 10.0,
    ):
        self.paths = paths
        self.server = server
        self.hosts = hosts
        self._client_factory = client_factory or (
            lambda h: make_kazoo_client(h, session_timeout_s=session_timeout_s)
        )
        counter = itertools.count()
        self._batches = BatchSet(
            limits or BatchLimits(),
            lambda: batch_znode_name(server.name, server.type.value, server.tier, next(counter)),
        )
        self._lock = threading.Lock()  # one writer at a time: the state and its znodes move together
        self._zk: KazooClient | None = None
        self._dirty = False
        self._stopped = False
        self.resyncs = 0  # full re-announcements after the first (visible in /status and tests)

    @property
    def zk(self) -> KazooClient:
        if self._zk is None:
            raise RuntimeError("ZkAnnouncer is not started")
        return self._zk

    @property
    def session_id(self) -> int | None:
        zk = self._zk
        return None if zk is None or zk.client_id is None else int(zk.client_id[0])

    # -- lifecycle -------------------------------------------------------------------------------
    async def start(self) -> None:
        await asyncio.to_thread(self._start)

    def _start(self) -> None:
        zk = self._client_factory(self.hosts)
        zk.add_listener(self._on_state)
        zk.start(timeout=30)
        self._zk = zk
        with self._lock:
            self._write_all()
        self.resyncs = 0

    async def stop(self) -> None:
        """Close the session: ZooKeeper removes every ephemeral znode of ours at once."""
        self._stopped = True
        zk, self._zk = self._zk, None
        if zk is not None:
            await asyncio.to_thread(_close, zk)

    # -- announcing ------------------------------------------------------------------------------
    async def announce(self, segments: Sequence[DataSegment]) -> None:
        if segments:
            await asyncio.to_thread(self._change, list(segments), [])

    async def unannounce(self, segments: Sequence[DataSegment]) -> None:
        if segments:
            await asyncio.to_thread(self._change, [], [s.id for s in segments])

    async def reconcile(self) -> None:
        """Write everything again if an earlier write failed (called periodically)."""
        if self._dirty and not self._stopped and self._zk is not None and self._zk.connected:
            await asyncio.to_thread(self._resync)

    def announced_ids(self) -> int:
        return len(self._batches)

    def _change(self, add: list[DataSegment], remove: list[str]) -> None:
        with self._lock:
            changed = self._batches.add(add) | self._batches.remove(remove)
            if self._dirty or self._zk is None:
                return  # a full write is pending; it will carry this change
            try:
                for name in sorted(changed):
                    self._write_batch(name)
            except Exception as e:  # kazoo errors of all kinds: retry with a full write later
                self._mark_dirty(e)

    # -- kazoo thread side -----------------------------------------------------------------------
    def _on_state(self, state: str) -> None:
        """kazoo's connection listener must not block: a full write runs on its own thread."""
        if self._stopped:
            return
        if state == "LOST":
            log.warning("ZooKeeper session lost: will announce everything again on reconnect")
            self._dirty = True
        elif state == "CONNECTED" and self._dirty:
            threading.Thread(target=self._resync, name="zk-reannounce", daemon=True).start()

    def _resync(self) -> None:
        with self._lock:
            if self._stopped or self._zk is None:
                return
            try:
                self._write_all()
                self.resyncs += 1
                log.info("re-announced %s and %d segments", self.server.name, len(self._batches))
            except Exception as e:
                self._mark_dirty(e)

    def _mark_dirty(self, error: BaseException) -> None:
        self._dirty = True
        log.warning("ZooKeeper announcement failed (%s: %s); will retry", type(error).__name__, error)

    def _write_all(self) -> None:
        self._dirty = True  # until this completes
        zk = self.zk
        folder = self.paths.server_segments(self.server.name)
        zk.retry(zk.ensure_path, self.paths.announcements)
        zk.retry(zk.ensure_path, folder)
        self._write_ephemeral(self.paths.announcement(self.server.name), self.server.to_bytes())
        wanted = set(self._batches.names())
        for stale in set(zk.retry(zk.get_children, folder)) - wanted:
            # batches of an earlier process of this server whose session has not expired yet
            self._delete(f"{folder}/{stale}")
        for name in sorted(wanted):
            self._write_batch(name)
        self._dirty = False

    def _write_batch(self, name: str) -> None:
        path = self.paths.batch(self.server.name, name)
        content = self._batches.content(name)
        if content is None:
            self._delete(path)
        else:
            self._write_ephemeral(path, content)

    def _write_ephemeral(self, path: str, data: bytes) -> None:
        from kazoo.exceptions import NodeExistsError, NoNodeError

        zk = self.zk
        try:
            zk.retry(zk.create, path, data, ephemeral=True)
            return
        except NodeExistsError:
            pass
        stat = zk.retry(zk.exists, path)
        if stat is not None and stat.ephemeralOwner == self.session_id:
            zk.retry(zk.set, path, data)
            return
        with contextlib.suppress(NoNodeError):  # left by a dead session of ours: take it over
            zk.retry(zk.delete, path)
        zk.retry(zk.create, path, data, ephemeral=True)

    def _delete(self, path: str) -> None:
        from kazoo.exceptions import NoNodeError

        with contextlib.suppress(NoNodeError):
            self.zk.retry(self.zk.delete, path)


async def reconcile_forever(announcer: ZkAnnouncer, period_s: float = 2.0) -> None:
    """Write every announcement again whenever an earlier write failed (run as a background task)."""
    while True:
        await asyncio.sleep(period_s)
        try:
            await announcer.reconcile()
        except Exception as e:
            log.warning("ZooKeeper reconcile failed: %s", e)


async def leave(background: Sequence[asyncio.Task[Any]], announcer: ZkAnnouncer | None) -> None:
    """Stop a node's background work, then close its ZooKeeper session (every znode of ours goes).

    Run first when a node is asked to stop, so brokers stop routing to it while in-flight queries
    drain; again (a no-op) by the lifespan's shutdown.
    """
    for t in background:
        t.cancel()
    await asyncio.gather(*background, return_exceptions=True)
    if announcer is not None:
        await announcer.stop()


def _close(zk: Any) -> None:
    try:
        zk.stop()
    finally:
        zk.close()
