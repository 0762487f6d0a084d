"""The HTTP segment change feed (Druid's ChangeRequestHistory + SegmentListerResource).

`GET /druid-internal/v1/segments?counter=&hash=&timeout=`: `counter=-1` gives every announced
segment as a `load` request; a later call with the returned counter gets the changes since, or
waits (long-poll, on the event loop, no thread) up to `timeout` ms for one and answers 204 when
none came. A counter this history cannot vouch for (hash mismatch, from the future, or older than
the last `max_changes` changes) gets `resetCounter:true`, and the client starts over with -1.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Sequence

import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from strata.discovery import ChangeCounter, ChangeRequest, ChangeRequestsSnapshot
from timeline import DataSegment

FEED_PATH = "/druid-internal/v1/segments"
MAX_CHANGES = 1000
MAX_WAIT_MS = 5 * 60 * 1000


class ChangeHistory:
    """Announced segments plus a bounded log of changes; mutated on the event loop thread only."""

    def __init__(self, max_changes: int = MAX_CHANGES):
        self._segments: dict[str, DataSegment] = {}
        self._changes: deque[tuple[ChangeCounter, ChangeRequest]] = deque()
        self._max_changes = max_changes
        self._base = ChangeCounter(0, self._next_hash(0))  # the position before the oldest kept change
        self._last = self._base
        self._changed = asyncio.Event()
        self._closed = False

    def close(self) -> None:
        """The server is stopping: waiting and later long-polls answer at once, so draining the
        server's connections ends instead of waiting out (then cancelling) every broker's poll."""
        self._closed = True
        self._changed.set()

    def _next_hash(self, previous: int) -> int:
        # Druid uses the creation time in ms; strictly increasing so two counters never share one
        return max(int(time.time() * 1000), previous + 1)

    @property
    def last(self) -> ChangeCounter:
        return self._last

    def segments(self) -> list[DataSegment]:
        return list(self._segments.values())

    async def announce(self, segments: Sequence[DataSegment]) -> None:
        for segment in segments:
            if segment.id not in self._segments:
                self._segments[segment.id] = segment
                self._record(ChangeRequest("load", segment))

    async def unannounce(self, segments: Sequence[DataSegment]) -> None:
        for segment in segments:
            if self._segments.pop(segment.id, None) is not None:
                self._record(ChangeRequest("drop", segment))

    def _record(self, request: ChangeRequest) -> None:
        self._last = ChangeCounter(self._last.counter + 1, self._next_hash(self._last.hash))
        self._changes.append((self._last, request))
        if len(self._changes) > self._max_changes:
            self._base = self._changes.popleft()[0]
        self._changed.set()
        self._changed = asyncio.Event()

    def since(self, counter: ChangeCounter | None) -> ChangeRequestsSnapshot | None:
        """The answer for `counter` (None = full snapshot); None when nothing changed since it."""
        if counter is None or counter.counter < 0:
            loads = tuple(ChangeRequest("load", s) for s in self._segments.values())
            return ChangeRequestsSnapshot.success(self._last, loads)
        if counter.counter > self._last.counter:
            return ChangeRequestsSnapshot.fail(
                f"counter[{counter.counter}] > last counter[{self._last.counter}]"
            )
        if counter.counter < self._base.counter:
            return ChangeRequestsSnapshot.fail(
                f"counter[{counter.counter}] is older than the oldest change kept[{self._base.counter}]"
            )
        offset = counter.counter - self._base.counter  # entries [offset:] are newer than counter
        known = self._base if offset == 0 else self._changes[offset - 1][0]
        if known.hash != counter.hash:
            return ChangeRequestsSnapshot.fail(f"counter[{counter.counter}] has a different hash")
        if offset == len(self._changes):
            return None
        requests = tuple(request for _, request in list(self._changes)[offset:])
        return ChangeRequestsSnapshot.success(self._last, requests)

    async def wait_since(
        self, counter: ChangeCounter | None, timeout_s: float
    ) -> ChangeRequestsSnapshot | None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while True:
            answer = self.since(counter)
            remaining = deadline - loop.time()
            if answer is not None or remaining <= 0 or self._closed:
                return answer
            try:
                await asyncio.wait_for(self._changed.wait(), remaining)
            except TimeoutError:
                return None


def _error(status: int, message: str) -> Response:
    body = {"error": message}
    return Response(orjson.dumps(body), status_code=status, media_type="application/json")


def _long(request: Request, name: str, default: int | None) -> int:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        if default is None:
            raise ValueError(f"query parameter [{name}] is required")
        return default
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"query parameter [{name}] must be an integer, got {raw!r}") from None


def change_feed_route(history: ChangeHistory) -> Route:
    async def segments(request: Request) -> Response:
        try:
            counter = _long(request, "counter", -1)
            hash_ = _long(request, "hash", 0)
            timeout_ms = _long(request, "timeout", None)
        except ValueError as e:
            return _error(400, str(e))
        if timeout_ms <= 0:
            return _error(400, "timeout must be positive.")
        position = None if counter < 0 else ChangeCounter(counter, hash_)
        answer = await history.wait_since(position, min(timeout_ms, MAX_WAIT_MS) / 1000)
        if answer is None:
            return Response(status_code=204)
        return Response(orjson.dumps(answer.to_json()), media_type="application/json")

    return Route(FEED_PATH, segments, methods=["GET"])
