"""Refusals answered before routing: while admission is refusing some queries (a lane at its cap, or
every slot and the queue taken), a query request it would refuse gets Druid's 429 from ASGI, without
Starlette's routing, request and response objects, exception handlers or a fresh parse.

Under a flood of heavy statements retried at once, the broker answers hundreds of 429s a second on
the event loop its cheap queries need, and a burst of them answered one after another is a wait
for every cheap query arriving behind it (bench.overload). Druid's scheduler, too, refuses before
any work. What the handlers check before admission is checked here the same way, so a request gets
the same answer either way: a native query only when its exact body was parsed before
(broker_service.query_bodies remembers valid bodies: a retry's), a SQL statement after the checks
of its body, id and format and without SET statements that may change its lane
(broker_service.sql_api). Anything else — nothing refusing (no body read at all), a secured node (its
handlers authorize first), a query string (`?pretty`), a streamed Arrow scan (no admission), a
large or unread body, any error — passes to the app unchanged, the body handed on as it came.
"""

from __future__ import annotations

import time
import uuid
from typing import TYPE_CHECKING

from starlette.types import ASGIApp, Receive, Scope, Send

from broker_service.admission import RETRY_AFTER_S
from broker_service.fast_path import GUARD_KEY, read_body, replay
from broker_service.laning import scheduling_keys
from broker_service.sql_api import (
    LARGE_BODY_BYTES,
    decode_body,
    refuse_before_planning,
    sql_error,
    statement_head,
)
from strata.query.errors import QueryCapacityExceeded, QueryError
from strata.query.scan import ScanQuery
from strata.server.json_response import json_response
from strata.wire import QUERY_ID_HEADER, SQL_QUERY_ID_HEADER, wants_arrow

if TYPE_CHECKING:
    from broker_service.broker import Broker

NATIVE_PATHS = frozenset({"/druid/v2", "/druid/v2/"})
SQL_PATHS = frozenset({"/druid/v2/sql", "/druid/v2/sql/"})
RETRY_AFTER = {"Retry-After": str(RETRY_AFTER_S)}


class RefusalPath:
    def __init__(self, app: ASGIApp, broker: Broker) -> None:
        self.app = app
        self.broker = broker

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path")
        native = path in NATIVE_PATHS
        if not (native or path in SQL_PATHS) or not self._eligible(scope):
            await self.app(scope, receive, send)
            return
        began = time.monotonic()
        messages, body = await read_body(receive, LARGE_BODY_BYTES)
        if body is not None and len(body) <= LARGE_BODY_BYTES:  # one message may bring more
            try:
                refused = self._native(scope, body, began) if native else self._sql(scope, body)
            except QueryError:  # the handler says it again, in its own order
                refused = None
            if refused is not None:
                await refused(scope, receive, send)
                return
        await self.app(scope, replay(messages, receive), send)

    def _eligible(self, scope: Scope) -> bool:
        if scope["type"] != "http" or scope["method"] != "POST" or scope.get("query_string"):
            return False
        return GUARD_KEY not in scope and self.broker.admission.refusing()

    def _native(self, scope: Scope, body: bytes, began: float) -> ASGIApp | None:
        query = self.broker.parsed_bodies.known(body)
        if query is None or (isinstance(query, ScanQuery) and wants_arrow(_header(scope, b"accept"))):
            return None
        priority, lane = scheduling_keys(query.context.raw)
        try:
            self.broker.admission.check(priority=priority, lane=lane)
        except QueryCapacityExceeded as e:
            metrics = self.broker.metrics
            metrics.queries.labels(query.query_type, "429").inc()
            metrics.on_query(query.data_source, query.query_type, time.monotonic() - began, 429)
            named = "queryId" in query.context.raw
            headers = {QUERY_ID_HEADER: query.context.query_id if named else str(uuid.uuid4()), **RETRY_AFTER}
            return json_response(e.to_body(self.broker.settings.host), e.status, headers=headers)
        return None

    def _sql(self, scope: Scope, raw: bytes) -> ASGIApp | None:
        kind = _header(scope, b"content-type").split(";")[0].strip().lower()
        body = decode_body(raw, kind)
        context, query_id, _ = statement_head(body, str(uuid.uuid4()))
        try:
            refuse_before_planning(self.broker.admission, body["query"], context)
        except QueryCapacityExceeded as e:
            headers = {SQL_QUERY_ID_HEADER: query_id, **RETRY_AFTER}
            return sql_error(e, self.broker.settings.host, headers)
        return None


def _header(scope: Scope, name: bytes) -> str:
    for key, value in scope["headers"]:
        if key == name:
            decoded: str = value.decode("latin-1")
            return decoded
    return ""
