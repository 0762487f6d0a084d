"""Segment inventory from ZooKeeper announcements, laid out as Druid does.

    <base>/announcements/<host:port>          ephemeral, DruidServerMetadata JSON
    <base>/segments/<host:port>/<batch>       ephemeral, JSON array of DataSegment

kazoo runs watch callbacks on its own thread; they only read ZooKeeper and parse JSON, then queue
the result for the event loop (one wake-up per run of posts), where all view mutations happen.
Each ChildrenWatch callback is taken as the latest complete state of that level, and each batch's
array is diffed against what that batch held before (a segment leaves a server only once none of
its batches holds it, so a segment moving between batches never blinks out). When the session is
lost the last view keeps serving; a new session re-reads everything and the view is diffed to it.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
from collections.abc import Callable
from functools import partial
from typing import Any

import orjson

from broker_service.inventory.base import InventoryStatus, ServerInventory
from broker_service.server_view import BrokerServerView
from strata.discovery import ZkPaths, make_kazoo_client, parse_batch
from strata.discovery.server_metadata import ServerMetadata
from timeline import DataSegment

log = logging.getLogger(__name__)


class ZkInventory(ServerInventory):
    def __init__(
        self,
        view: BrokerServerView,
        hosts: str,
        *,
        base_path: str = "/druid",
        client_factory: Callable[[str], Any] | None = None,
        session_timeout_s: float = 10.0,
    ):
        self.view = view
        self.hosts = hosts
        self.paths = ZkPaths(base_path)
        self.announcements_path = self.paths.announcements
        self.segments_path = self.paths.segments
        self._client_factory = client_factory
        self._session_timeout_s = session_timeout_s
        self._zk: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()  # guards the kazoo-thread state below
        self._generation = 0
        # each watch carries a token; a watch whose token is no longer current stops itself
        self._tokens = itertools.count(1)
        self._server_tokens: dict[str, int] = {}
        self._batch_tokens: dict[str, dict[str, int]] = {}  # server -> batch -> token
        # loop-thread state: per server, per batch, the segment ids it held (ids only, the view's own
        # strings: the segments themselves live once, in the view)
        # (tuples: a million segments' ids fill them, and a set weighs six times a tuple per id)
        self._batches: dict[str, dict[str, tuple[str, ...]]] = {}
        self._status = InventoryStatus(kind="zk")
        # kazoo thread -> event loop: posted calls, and whether a drain is already scheduled
        self._inbox_lock = threading.Lock()
        self._inbox: list[tuple[Callable[..., None], tuple[Any, ...]]] = []
        self._drain_due = False
        self._lost = False
        self._stopped = False

    # -- lifecycle --------------------------------------------------------------------------------
    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        await asyncio.to_thread(self._connect)

    def _connect(self) -> None:
        if self._client_factory is not None:
            self._zk = self._client_factory(self.hosts)
        else:
            self._zk = make_kazoo_client(self.hosts, session_timeout_s=self._session_timeout_s)
        self._zk.add_listener(self._on_state)
        self._zk.start(timeout=30)
        self._set_status(connected=True)
        self._watch_all()

    async def stop(self) -> None:
        self._stopped = True
        zk = self._zk
        if zk is not None:
            self._zk = None
            await asyncio.to_thread(_close, zk)

    def status(self) -> InventoryStatus:
        return self._status

    # -- kazoo thread -----------------------------------------------------------------------------
    def _on_state(self, state: str) -> None:
        """kazoo connection listener: must not block, so a re-read runs on its own thread."""
        if state == "LOST":
            self._lost = True
            self._set_status(connected=False, error="ZooKeeper session lost", outage=True)
        elif state == "SUSPENDED":
            self._set_status(connected=False, error="ZooKeeper connection suspended", outage=True)
        elif state == "CONNECTED":
            self._set_status(connected=True)
            if self._lost and not self._stopped:
                self._lost = False
                threading.Thread(target=self._watch_all, name="zk-resync", daemon=True).start()

    def _watch_all(self) -> None:
        """(Re)start every watch; watches of an older session stop at their next event."""
        from kazoo.recipe.watchers import ChildrenWatch

        with self._lock:
            self._generation += 1
            generation = self._generation
            self._server_tokens.clear()
            self._batch_tokens.clear()
        zk = self._zk
        if zk is None:
            return
        zk.ensure_path(self.announcements_path)
        zk.ensure_path(self.segments_path)
        ChildrenWatch(zk, self.announcements_path, partial(self._on_servers, generation))
        self._post(self._mark_initialized)

    def _on_servers(self, generation: int, children: list[str]) -> bool | None:
        if generation != self._generation or self._stopped:
            return False
        from kazoo.exceptions import NoNodeError
        from kazoo.recipe.watchers import ChildrenWatch

        zk = self._zk
        present: dict[str, ServerMetadata] = {}
        for child in children:
            try:
                data, _ = zk.get(f"{self.announcements_path}/{child}")
                present[child] = ServerMetadata.from_json(orjson.loads(data))
            except NoNodeError:
                continue
            except (ValueError, TypeError) as e:
                log.warning("ignoring malformed announcement %s: %s", child, e)
        self._post(self._servers_present, present)
        started: list[tuple[str, int]] = []
        with self._lock:
            for name in [n for n in self._server_tokens if n not in present]:
                del self._server_tokens[name]
                self._batch_tokens.pop(name, None)
            for name in present:
                if name not in self._server_tokens:
                    self._server_tokens[name] = token = next(self._tokens)
                    started.append((name, token))
        for name, token in started:
            path = f"{self.segments_path}/{name}"
            zk.ensure_path(path)
            ChildrenWatch(zk, path, partial(self._on_batches, token, name))
        return None

    def _on_batches(self, token: int, server: str, children: list[str]) -> bool | None:
        started: list[tuple[str, int]] = []
        with self._lock:
            if self._server_tokens.get(server) != token or self._stopped:
                return False
            # per server, not over every batch of the cluster: a thousand nodes hold tens of
            # thousands of batches, and each node's batch changes would otherwise scan them all
            tokens = self._batch_tokens.setdefault(server, {})
            present = set(children)
            for batch in [b for b in tokens if b not in present]:
                del tokens[batch]
            for child in children:
                if child not in tokens:
                    tokens[child] = batch_token = next(self._tokens)
                    started.append((child, batch_token))
        self._post(self._batches_present, server, present, self._vanished(server))
        from kazoo.recipe.watchers import DataWatch

        for child, batch_token in started:
            path = f"{self.segments_path}/{server}/{child}"
            DataWatch(self._zk, path, partial(self._on_batch_data, batch_token, server, child))
        return None

    def _on_batch_data(
        self, token: int, server: str, batch: str, data: bytes | None, stat: Any
    ) -> bool | None:
        with self._lock:
            tokens = self._batch_tokens.get(server, {})
            if tokens.get(batch) != token or self._stopped:
                return False
            if stat is None:  # the batch znode is gone
                del tokens[batch]
        if stat is None:
            self._post(self._apply_batch, server, batch, [], self._vanished(server))
            return False
        try:
            segments = parse_batch(data, compact=True, held=self.view.held_segment)
        except ValueError as e:
            log.warning("ignoring malformed segment batch %s/%s: %s", server, batch, e)
            return None
        self._post(self._apply_batch, server, batch, segments)
        return None

    def _vanished(self, server: str) -> bool:
        """Is the server's announcement gone? Then its batches went with its session, not on purpose.

        A session's ephemeral znodes are deleted in one transaction, so once a batch deletion is
        seen, this client's next read already misses the announcement too.
        """
        zk = self._zk
        try:
            return zk is None or zk.exists(f"{self.announcements_path}/{server}") is None
        except Exception:  # cannot tell: treat as vanished, which errs towards reporting missing data
            return True

    def _post(self, fn: Callable[..., None], *args: Any) -> None:
        """Queue `fn(*args)` for the event loop, in order. The loop is woken once per run of
        posts, not once per post: each wake-up writes its self-pipe while the GIL changes hands,
        a tenth of absorbing a thousand nodes' batches when each batch woke it."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        with self._inbox_lock:
            self._inbox.append((fn, args))
            if self._drain_due:
                return
            self._drain_due = True
        loop.call_soon_threadsafe(self._drain)

    def _set_status(self, *, connected: bool, error: str | None = None, outage: bool = False) -> None:
        def apply() -> None:
            if outage and self._status.connected:
                self._status.outages += 1
            self._status.connected = connected
            if error is not None:
                self._status.last_error = error

        self._post(apply)

    # -- event loop thread ------------------------------------------------------------------------
    def _drain(self) -> None:
        """Run what was posted, in order; a post arriving meanwhile schedules the next drain."""
        with self._inbox_lock:
            posted, self._inbox = self._inbox, []
            self._drain_due = False
        for fn, args in posted:
            try:
                fn(*args)
            except Exception:  # one failing change stops no other (as separate callbacks did)
                log.exception("applying a ZooKeeper change to the server view failed")

    def _mark_initialized(self) -> None:
        self._status.initialized = True

    def _servers_present(self, present: dict[str, ServerMetadata]) -> None:
        for name in [n for n in self._batches if n not in present]:
            self._batches.pop(name, None)
            self.view.remove_server(name)
        for server in present.values():
            self._batches.setdefault(server.name, {})
            self.view.add_server(server)

    def _batches_present(self, server: str, children: set[str], vanished: bool = False) -> None:
        for batch in [b for b in self._batches.get(server, {}) if b not in children]:
            self._apply_batch(server, batch, [], vanished)

    def _apply_batch(
        self, server: str, batch: str, segments: list[DataSegment], vanished: bool = False
    ) -> None:
        if server not in self._batches or self.view.server(server) is None:
            return  # server gone (or not announced yet): its segments are not served
        batches = self._batches[server]
        old = batches.get(batch, ())
        held_before = set(old)
        new = {s.id: s for s in segments}
        for segment_id, segment in new.items():
            if segment_id not in held_before:
                self.view.add_segment(server, segment)  # no-op when another batch holds it already
        if new:
            batches[batch] = tuple(map(self._shared_id, new))
        else:
            batches.pop(batch, None)
        gone = [segment_id for segment_id in old if segment_id not in new]
        if gone:
            # gone from the server only once no batch of it holds the segment (a segment moving
            # between batches never blinks out); asked of the batches, not of a per-segment count:
            # removals are rare, and a count per segment and server weighed 90 B of each segment
            elsewhere = set().union(*batches.values())
            for segment_id in gone:
                if segment_id not in elsewhere:
                    self.view.remove_segment(server, segment_id, vanished=vanished)

    def _shared_id(self, segment_id: str) -> str:
        """The view's copy of the id string, so a batch holds no second copy of it."""
        selector = self.view.selector(segment_id)
        return segment_id if selector is None else selector.segment.id


def _close(zk: Any) -> None:
    try:
        zk.stop()
        zk.close()
    except Exception as e:  # closing is best effort
        log.debug("closing ZooKeeper client: %s", e)
