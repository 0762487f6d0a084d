"""A small real change-feed server (Druid's ChangeRequestsSnapshot over HTTP) for inventory tests."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from timeline import DataSegment


class FeedState:
    """Announced segments plus a change history; thread-safe (the test thread mutates it)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.segments: dict[str, DataSegment] = {}
        self.history: list[tuple[str, DataSegment]] = []  # index i = change number i+1
        self.hash = int(time.time() * 1000)
        self.requests: list[dict[str, str]] = []

    def load(self, segment: DataSegment) -> None:
        with self.lock:
            self.segments[segment.id] = segment
            self.history.append(("load", segment))

    def drop(self, segment: DataSegment) -> None:
        with self.lock:
            self.segments.pop(segment.id, None)
            self.history.append(("drop", segment))

    def new_epoch(self) -> None:
        """Forget history (as a restarted node would): old counters must trigger a reset."""
        with self.lock:
            self.history.clear()
            self.hash += 1

    def answer(self, counter: int, hash_: int | None) -> dict[str, Any] | None:
        with self.lock:
            current = len(self.history)
            snapshot_counter = {"counter": current, "hash": self.hash}
            if counter < 0:
                requests = [{"action": "load", **s.to_json()} for s in self.segments.values()]
                return {
                    "resetCounter": False,
                    "resetCause": None,
                    "counter": snapshot_counter,
                    "requests": requests,
                }
            if hash_ != self.hash or counter > current:
                return {
                    "resetCounter": True,
                    "resetCause": "counter mismatch",
                    "counter": None,
                    "requests": None,
                }
            if counter == current:
                return None
            requests = [{"action": a, **s.to_json()} for a, s in self.history[counter:]]
            return {
                "resetCounter": False,
                "resetCause": None,
                "counter": snapshot_counter,
                "requests": requests,
            }


def feed_app(state: FeedState) -> Starlette:
    async def segments(request: Request) -> Response:
        params = request.query_params
        state.requests.append(dict(params))
        timeout_ms = int(params.get("timeout", "0"))
        if timeout_ms <= 0:
            return Response(status_code=400)
        counter = int(params.get("counter", "-1"))
        hash_ = int(params["hash"]) if "hash" in params else None
        deadline = time.monotonic() + timeout_ms / 1000
        while True:
            body = state.answer(counter, hash_)
            if body is not None:
                return Response(orjson.dumps(body), media_type="application/json")
            if time.monotonic() >= deadline:
                return Response(status_code=204)
            await asyncio.sleep(0.02)

    return Starlette(routes=[Route("/druid-internal/v1/segments", segments)])
