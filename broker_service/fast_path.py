"""The native query endpoint's fast path: a remembered whole answer sent straight from ASGI.

A POST to /druid/v2 whose exact body was answered before, while the server view stands still
(broker_service.answer_memo), is answered here before Starlette's routing, request and response
objects are built: one dictionary lookup, a query id, two ASGI messages with the header lines
prepared when the answer was recorded. Everything else — a first request, a changed view, a
query string (`?pretty`), `If-None-Match`, a secured node (its handler authorizes the body's
datasource), a body too long to remember — passes to the app unchanged (the body already read is
handed on as it came), and the handler records its answer (`remember`) before sending it. A body
not remembered whole is offered next to broker_service.segment_path, which answers from every
segment's cached partial, looked up per request.
"""

from __future__ import annotations

import time
import uuid
from typing import TYPE_CHECKING

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from broker_service.answer_memo import MAX_BODY_BYTES, AnswerMemo, MemoAnswer
from broker_service.lookup_keys import answer_version
from broker_service.segment_path import SegmentPath

if TYPE_CHECKING:
    from broker_service.broker import Broker

QUERY_PATHS = frozenset({"/druid/v2", "/druid/v2/"})
QUERY_ID_LINE = b"x-druid-query-id"
# in the scope when security is on (security.http puts its guard there): the handler authorizes
GUARD_KEY = "strata.guard"


class WholeAnswerPath:
    def __init__(self, app: ASGIApp, broker: Broker) -> None:
        self.app = app
        self.broker = broker
        cache = broker.segment_cache
        # then every segment's cached partial, looked up per request (broker_service.segment_path)
        self.segments = SegmentPath(broker, cache) if cache is not None else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        memo = self.broker.answer_memo
        if (memo is None and self.segments is None) or not _eligible(scope):
            await self.app(scope, receive, send)
            return
        began = time.monotonic()
        messages, body = await read_body(receive, MAX_BODY_BYTES)
        if body is not None:
            answer = memo.get(body, answer_version(self.broker.view.version)) if memo is not None else None
            if answer is not None:
                await _send_answer(answer, send)
                self._count(answer, began)
                return
            if self.segments is not None and await self.segments.answer(body, send):
                return
        await self.app(scope, replay(messages, receive), send)

    def _count(self, answer: MemoAnswer, began: float) -> None:
        """What the handler counts for an answer from the result-level cache."""
        metrics = self.broker.metrics
        metrics.queries.labels(answer.query_type, "200").inc()
        metrics.on_query(answer.data_source, answer.query_type, time.monotonic() - began, 200)
        results = self.broker.runner.result_cache
        if results is not None:
            results.hits += 1


def _eligible(scope: Scope) -> bool:
    if scope["type"] != "http" or scope["method"] != "POST" or scope["path"] not in QUERY_PATHS:
        return False
    if scope.get("query_string") or GUARD_KEY in scope:
        return False
    return not any(name == b"if-none-match" for name, _ in scope["headers"])


async def _send_answer(answer: MemoAnswer, send: Send) -> None:
    query_id = answer.query_id or str(uuid.uuid4()).encode()
    headers = [(QUERY_ID_LINE, query_id), *answer.headers]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": answer.body})


async def read_body(receive: Receive, max_bytes: int) -> tuple[list[Message], bytes | None]:
    """The messages read, and the whole body when it came complete within `max_bytes`."""
    messages: list[Message] = []
    size = 0
    while True:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request":
            return messages, None  # a disconnect: the app hears of it as it would have
        size += len(message.get("body", b""))
        if not message.get("more_body", False):
            break
        if size > max_bytes:
            return messages, None  # the rest stays unread, for the app
    if len(messages) == 1:
        return messages, messages[0].get("body", b"")
    return messages, b"".join(m.get("body", b"") for m in messages)


def replay(messages: list[Message], receive: Receive) -> Receive:
    """`receive` with the messages already read given back first."""
    pending = list(messages)

    async def replayed() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replayed


def remember(
    memo: AnswerMemo, request: bytes, version: int, body: bytes, raw_headers: list[tuple[bytes, bytes]],
    named_id: str | None, data_source: str, query_type: str,
) -> None:  # fmt: skip
    """Record an answer as the handler is about to send it (the query id line left out)."""
    headers = tuple((k, v) for k, v in raw_headers if k != QUERY_ID_LINE)
    named = named_id.encode() if named_id is not None else None
    memo.put(request, MemoAnswer(version, body, headers, named, data_source, query_type, len(request)))
