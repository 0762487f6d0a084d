"""The native query endpoint's per-segment warm path: a timeseries whose every segment is cached,
answered from ASGI without Starlette or the query runner's task, timeout and scatter.

What it does per request is what the full path does when everything is cached, no less: the
body's remembered parse, the (reused) segment plan, a lookup of every segment's partial in the
cache now (so a segment changed since the last request reads its own new partial, and only it is
finalized anew), the answer joined from each partial's remembered rows
(broker_service.row_fragments), or merged inline when the partials are small. When every partial
read is the very table object the query's last answer came from (segment_cache keeps a plan's
last read, compared payload by payload), that answer's bytes are sent again: identity, not
equality, so a changed segment always reads and joins its own new partial. What it leaves out
is the machinery around work that never or briefly waits: routing, Request and Response
objects, a task per query with its timeout and cancel registry (the in-process LRU never
suspends; memcached's one read, or the hybrid's L2 read of what L1 lacks, is bounded by the
cache client's own timeout), the scatter over no segment to fetch, the admission slot.

It steps aside (returns False, nothing sent, nothing counted) for anything else, and the full path
then answers as it always did: a body not parsed before (or one that fails to parse), a query type
or context it does not cover, the whole-answer cache in play, a segment not cached or not
cacheable (with a remote cache: after its read), an answer over a limit (the full path raises
the error), a merge too large to run on the event loop.
"""

from __future__ import annotations

import contextlib
import logging
import time
import uuid
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from cachetools import LRUCache
from starlette.types import Send

from broker_service.merging import merge_and_finalize
from broker_service.metadata_answers import metadata_answerable
from broker_service.query_runner import FRAGMENTS_INLINE_NEW, INLINE_MERGE_ROWS
from broker_service.response_context import encode_response_context
from broker_service.result_cache import result_cacheable
from broker_service.row_fragments import fragment_answer
from strata.query import Query
from strata.query.timeseries import TimeseriesQuery

if TYPE_CHECKING:
    from broker_service.broker import Broker
    from broker_service.segment_cache import SegmentCache
    from broker_service.segment_plan import SegmentPlan

log = logging.getLogger(__name__)

QUERY_ID_LINE = b"x-druid-query-id"
CONTEXT_LINE = b"x-druid-response-context"
JSON_LINE = (b"content-type", b"application/json")
EMPTY_CONTEXT = encode_response_context({}).encode()
ANSWER_MEMO_BYTES = 16 * 1024 * 1024  # the last answers' bytes, per query object, bounded together


class _Answer:
    """A query object's plan while the server view's version stands, and its last answer with the
    partials list it was made from (all held: their ids stay unique while remembered)."""

    __slots__ = ("body", "length", "partials", "plan", "query", "version")

    def __init__(self, query: Query, version: int, plan: SegmentPlan, partials: list[pa.Table], body: bytes):
        self.query, self.version, self.plan, self.partials, self.body = query, version, plan, partials, body
        self.length = (b"content-length", str(len(body)).encode())


class SegmentPath:
    def __init__(self, broker: Broker, cache: SegmentCache):
        self.broker = broker
        self.cache = cache
        self._answers: LRUCache[int, _Answer] = LRUCache(ANSWER_MEMO_BYTES, getsizeof=_answer_size)
        self._answered: dict[str, Any] = {}  # query type -> its counter of answers (a labels lookup)

    async def answer(self, body: bytes, send: Send) -> bool:
        """Answer `body` here when every segment's partial is cached; False: the full path's turn."""
        began = time.monotonic()
        broker = self.broker
        query = broker.parsed_bodies.known(body)
        if query is None or not _covered(query, broker.runner.result_cache is not None):
            return False
        try:
            answer = await self._answer(query)
        except Exception:  # a limit crossed, anything unforeseen: the full path gives the error
            log.debug("the per-segment warm path stepped aside", exc_info=True)
            return False
        if answer is None:
            return False
        plan = answer.plan
        head = _head(query, answer.length, _context(query, plan.uncovered, plan.uncovered_overflowed))
        if head is None:
            return False
        await send({"type": "http.response.start", "status": 200, "headers": head})
        await send({"type": "http.response.body", "body": answer.body})
        self._count(query, len(plan.tasks), began)
        return True

    async def _answer(self, query: Query) -> _Answer | None:
        version = self.broker.view.version
        last = self._answers.get(id(query))
        if last is not None and last.query is not query:
            last = None
        # the plan changes only with the view (the planner keeps it while the timeline stands)
        plan = last.plan if last is not None and last.version == version else None
        if plan is None:
            plan = self.broker.runner.planner.plan(query)
        partials = await self.cache.every_partial(query, plan.tasks, version)
        if partials is None:
            return None
        # a repeat reading the very same decoded tables gets the very same list object
        # (segment_cache's read memo, after comparing every payload): the same answer
        if last is not None and last.plan is plan and last.partials is partials:
            last.version = version
            return last
        body = self._joined(query, partials)
        if body is None:
            return None
        answer = _Answer(query, version, plan, partials, body)
        with contextlib.suppress(ValueError):  # larger than the whole memo: not remembered
            self._answers[id(query)] = answer
        return answer

    def _joined(self, query: Query, partials: list[pa.Table]) -> bytes | None:
        rows = sum(t.num_rows for t in partials)
        limits = self.broker.runner.limits
        if rows > limits.max_gathered_rows:
            return None
        answer = fragment_answer(query, partials, limits.max_result_rows, new_limit=FRAGMENTS_INLINE_NEW)
        if isinstance(answer, bytes):
            return answer
        if rows > INLINE_MERGE_ROWS:  # the full path merges that in its pool
            return None
        return merge_and_finalize(query, partials, limits.max_result_rows)[1]

    def _count(self, query: Query, segments: int, began: float) -> None:
        """What the handler and the runner count for a query answered from cached partials."""
        self.cache.stats["warm"] += 1
        metrics = self.broker.metrics
        metrics.native_queries += 1
        metrics.segments_queried.inc(segments)
        answered = self._answered.get(query.query_type)
        if answered is None:
            answered = self._answered[query.query_type] = metrics.queries.labels(query.query_type, "200")
        answered.inc()
        metrics.on_query(query.data_source, query.query_type, time.monotonic() - began, 200)


def _covered(query: Query, result_cache: bool) -> bool:
    """A shape whose answer from cached partials this path gives exactly as the full path does."""
    if type(query) is not TimeseriesQuery or not query.plain_table:
        return False
    context = query.context
    if context.by_segment or not context.use_cache or metadata_answerable(query):
        return False
    # the whole-answer cache's turn (an ETag, a stored answer), and fast_path's before it
    return not (result_cache and result_cacheable(query))


def _context(query: Query, uncovered: tuple[object, ...], overflowed: bool) -> bytes:
    if query.context.uncovered_intervals_limit <= 0:
        return EMPTY_CONTEXT
    context = {"uncoveredIntervals": [str(i) for i in uncovered], "uncoveredIntervalsOverflowed": overflowed}
    return encode_response_context(context).encode()


def _answer_size(answer: _Answer) -> int:
    return len(answer.body) + 200


def _head(query: Query, length: tuple[bytes, bytes], context: bytes) -> list[tuple[bytes, bytes]] | None:
    """The full path's head, line for line: query id, response context, length, JSON (None: an id
    Starlette could not write either, left to the full path's error)."""
    named = "queryId" in query.context.raw
    try:
        query_id = query.context.query_id.encode("latin-1") if named else str(uuid.uuid4()).encode()
    except UnicodeEncodeError:
        return None
    return [
        (QUERY_ID_LINE, query_id),
        (CONTEXT_LINE, context),
        length,
        JSON_LINE,
    ]
