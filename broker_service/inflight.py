"""Requests in flight per data server, so a server that leaves the cluster mid-query costs a retry
on a replica rather than the query.

A host cut off the network answers nothing and resets nothing: a request already sent to it would
wait for the query's whole timeout. When its announcement vanishes (its ZooKeeper session expired,
or the HTTP inventory lost it) the view cancels what is still waiting on it, and the scatter turns
that into a node failure, whose segments go to another replica.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any, TypeVar

T = TypeVar("T")


class ServerLeft(Exception):
    """The server's announcement vanished while a request to it was waiting."""


class InflightCalls:
    def __init__(self) -> None:
        self._calls: dict[str, set[asyncio.Future[Any]]] = {}
        self._left: set[asyncio.Future[Any]] = set()

    async def run(self, server: str, call: Awaitable[T]) -> T:
        """Await `call`; raises ServerLeft if `cancel_server(server)` runs first. A cancellation
        of the caller itself (a query timeout or cancel) passes through unchanged."""
        future: asyncio.Future[T] = asyncio.ensure_future(call)
        calls = self._calls.setdefault(server, set())
        calls.add(future)
        try:
            return await future
        except asyncio.CancelledError:
            if future in self._left:
                raise ServerLeft(server) from None
            raise
        finally:
            calls.discard(future)
            self._left.discard(future)
            if not calls and self._calls.get(server) is calls:
                del self._calls[server]

    def cancel_server(self, server: str) -> int:
        """Cancel every request waiting on `server`; returns how many (call on the event loop)."""
        calls = self._calls.pop(server, set())
        for future in calls:
            if not future.done():
                self._left.add(future)
                future.cancel()
        return len(calls)

    def count(self, server: str) -> int:
        return len(self._calls.get(server, ()))
