"""An in-memory ZooKeeper behind the slice of kazoo's client API that kazoo's own watch recipes and
the broker's `ZkInventory` call, so `bench.scale` can announce a thousand simulated data nodes to
the broker's real inventory code without a ZooKeeper process (or a thousand sessions).

Like kazoo, every watch callback runs on one event thread, in order; writes made by the simulated
data nodes (any thread) only queue the watches they trigger. One-shot data and child watches, one
session per simulated node (`expire` drops its ephemeral znodes at once, as a lost session does).
A znode's data may be a callable, encoded when read: a million announced segments are then not a
gigabyte of JSON held here beside the broker being measured.
"""

from __future__ import annotations

import functools
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

from kazoo.exceptions import NodeExistsError, NoNodeError
from kazoo.protocol.states import EventType, KeeperState, WatchedEvent, ZnodeStat

Data = bytes | Callable[[], bytes]
Watcher = Callable[[WatchedEvent], object]


class _Handler:
    """What kazoo's recipes take from `client.handler`."""

    sleep_func = staticmethod(time.sleep)

    def __init__(self, events: queue.SimpleQueue[Callable[[], object] | None]):
        self._events = events

    def lock_object(self) -> threading.RLock:
        return threading.RLock()

    def spawn(self, fn: Callable[..., object], *args: Any) -> None:
        self._events.put(lambda: fn(*args))


class _Znode:
    __slots__ = ("children", "data", "mzxid", "owner")

    def __init__(self, data: Data, zxid: int, owner: str | None):
        self.data = data
        self.mzxid = zxid
        self.owner = owner
        self.children: set[str] = set()


class MemoryZooKeeper:
    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._nodes: dict[str, _Znode] = {"/": _Znode(b"", 0, None)}
        self._data_watches: dict[str, list[Watcher]] = {}
        self._child_watches: dict[str, list[Watcher]] = {}
        self._zxid = 0
        self._events: queue.SimpleQueue[Callable[[], object] | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._listeners: list[Callable[[str], object]] = []
        self.handler = _Handler(self._events)

    # -- the client side kazoo's recipes and ZkInventory use ----------------------------------------
    def start(self, timeout: float = 0) -> None:
        self._thread = threading.Thread(target=self._run, name="memory-zk-events", daemon=True)
        self._thread.start()
        for listener in list(self._listeners):
            listener("CONNECTED")

    def stop(self) -> None:
        self._events.put(None)
        if self._thread is not None:
            self._thread.join(timeout=30)

    def close(self) -> None:
        pass

    def add_listener(self, listener: Callable[[str], object]) -> None:
        self._listeners.append(listener)

    def remove_listener(self, listener: Callable[[str], object]) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)

    def retry(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    def ensure_path(self, path: str) -> None:
        with self._lock:
            if path not in self._nodes:
                self.create(path, b"", makepath=True)

    def get(self, path: str, watch: Watcher | None = None) -> tuple[bytes, ZnodeStat]:
        with self._lock:
            node = self._nodes.get(path)
            if node is None:
                raise NoNodeError(path)
            if watch is not None:
                self._data_watches.setdefault(path, []).append(watch)
            data, stat = node.data, self._stat(node)
        return (data() if callable(data) else data), stat

    def exists(self, path: str, watch: Watcher | None = None) -> ZnodeStat | None:
        with self._lock:
            if watch is not None:
                self._data_watches.setdefault(path, []).append(watch)
            node = self._nodes.get(path)
            return None if node is None else self._stat(node)

    def get_children(self, path: str, watch: Watcher | None = None) -> list[str]:
        with self._lock:
            node = self._nodes.get(path)
            if node is None:
                raise NoNodeError(path)
            if watch is not None:
                self._child_watches.setdefault(path, []).append(watch)
            return sorted(node.children)

    # -- the simulated data nodes' side ---------------------------------------------------------------
    def create(
        self, path: str, data: Data = b"", *, owner: str | None = None, makepath: bool = False
    ) -> None:
        with self._lock:
            if path in self._nodes:
                raise NodeExistsError(path)
            parent = path.rsplit("/", 1)[0] or "/"
            if parent not in self._nodes:
                if not makepath:
                    raise NoNodeError(parent)
                self.create(parent, b"", makepath=True)
            self._zxid += 1
            self._nodes[path] = _Znode(data, self._zxid, owner)
            self._nodes[parent].children.add(path.rsplit("/", 1)[1])
            self._fire(self._data_watches, path, EventType.CREATED)
            self._fire(self._child_watches, parent, EventType.CHILD)

    def set(self, path: str, data: Data) -> None:
        with self._lock:
            node = self._nodes.get(path)
            if node is None:
                raise NoNodeError(path)
            self._zxid += 1
            node.data, node.mzxid = data, self._zxid
            self._fire(self._data_watches, path, EventType.CHANGED)

    def delete(self, path: str) -> None:
        with self._lock:
            node = self._nodes.pop(path, None)
            if node is None:
                raise NoNodeError(path)
            parent = path.rsplit("/", 1)[0] or "/"
            self._nodes[parent].children.discard(path.rsplit("/", 1)[1])
            self._fire(self._data_watches, path, EventType.DELETED)
            self._fire(self._child_watches, path, EventType.DELETED)
            self._fire(self._child_watches, parent, EventType.CHILD)

    def expire(self, owner: str) -> None:
        """A session ends: its ephemeral znodes go at once (deepest first)."""
        with self._lock:
            for path in sorted((p for p, n in self._nodes.items() if n.owner == owner), reverse=True):
                self.delete(path)

    def wait_idle(self, timeout: float) -> bool:
        """Until every queued watch callback has run."""
        done = threading.Event()
        self._events.put(done.set)
        return done.wait(timeout)

    # -- internals ----------------------------------------------------------------------------------
    def _stat(self, node: _Znode) -> ZnodeStat:
        return ZnodeStat(0, node.mzxid, 0, 0, 0, 0, 0, 0, 0, len(node.children), 0)

    def _fire(self, watches: dict[str, list[Watcher]], path: str, kind: str) -> None:
        for watch in watches.pop(path, ()):
            event = WatchedEvent(kind, KeeperState.CONNECTED, path)
            self._events.put(functools.partial(watch, event))

    def _run(self) -> None:
        while (call := self._events.get()) is not None:
            try:
                call()
            except Exception:  # a failing callback stops no other, as in kazoo
                import logging

                logging.getLogger(__name__).exception("watch callback failed")
