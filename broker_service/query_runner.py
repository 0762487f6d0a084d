"""The broker's query path: plan -> per-segment cache -> scatter/gather with retries -> merge -> finalize.

Everything up to the gather runs on the event loop; merging and finalizing are CPU work and run
in a worker pool. The answer is never silently incomplete: segments no server could read end the
query with Druid's SegmentMissing error, or, with `returnPartialResults`, are listed in the
response context's `missingSegments`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any, TypeVar

import orjson
import pyarrow as pa

from broker_service.by_segment import by_segment_results
from broker_service.cache_policy import CacheLookup, NoSegmentCache, SegmentCachePolicy, SharedPartial
from broker_service.data_node_client import DataNodeClient, GatherBudget
from broker_service.merge_processes import MergeProcesses
from broker_service.merging import merge_and_encode, merge_and_finalize, scan_table
from broker_service.metadata_answers import metadata_answerable, split_by_facts, split_metadata_partials
from broker_service.metrics import BrokerMetrics
from broker_service.result_cache import ResultLevelCache, result_cacheable, segments_etag
from broker_service.row_fragments import TooManyNew, fragment_answer
from broker_service.scatter import GatherResult, Scatter
from broker_service.segment_plan import SegmentPlanner, SegmentTask
from broker_service.server_view import BrokerServerView
from strata.discovery.server_metadata import ServerMetadata
from strata.engine.subquery import answer_over_inline, answer_over_rows, inline_of
from strata.lookups.rows import lookup_inline
from strata.query import Query
from strata.query.context import DEFAULT_TIMEOUT_MS, scatter_gather_bytes_within, timeout_within
from strata.query.data_source import (
    InlineSource,
    JoinSource,
    LookupSource,
    QuerySource,
    TableSource,
    UnionSource,
    leaf,
    replace_right,
    with_leaf,
    wrappers,
)
from strata.query.errors import QueryCancelled, QueryTimeout, ResourceLimitExceeded, SegmentsMissing
from strata.query.scan import ScanQuery
from strata.server.json_response import encode_json
from strata.server.priority_threads import run_for_priority
from strata.sql.arrow_answer import SqlAnswer

log = logging.getLogger(__name__)
T = TypeVar("T")

# Partials this small are merged on the event loop: the hop to the merge pool and back (two
# wake-ups, a future) costs more than the merge itself, and the GIL serialises both anyway.
INLINE_MERGE_ROWS = 2_000
FRAGMENTS_INLINE_NEW = 8  # cached partials whose rows are finalized on the event loop, at most


@dataclass
class QueryResult:
    results: list[Any] | None  # None when answered from the result-level cache: `body` holds it
    response_context: dict[str, Any] = field(default_factory=dict)
    body: bytes | None = None  # the JSON answer, encoded off the event loop
    sql_body: bytes | None = None  # instead of both: the SQL answer written from the merged columns
    etag: str | None = None  # of the segments read, when the answer may be cached whole
    table: pa.Table | None = None  # a scan's merged partials, when asked (`run(as_table=True)`)


@dataclass
class _Running:
    task: asyncio.Task[QueryResult]
    servers: dict[str, ServerMetadata] = field(default_factory=dict)
    cancelled: bool = False


@dataclass(frozen=True)
class RunnerLimits:
    max_gathered_rows: int = 10_000_000  # partial rows received from data nodes for one query
    max_result_rows: int = 5_000_000  # rows of the merged result
    default_timeout_ms: int = DEFAULT_TIMEOUT_MS  # a query's `timeout` when its context has none
    max_timeout_ms: int = 0  # the most a query's `timeout` may be (0: no maximum)
    max_join_rows: int = 100_000  # rows of a join's right-side query (Druid's maxSubqueryRows)
    max_scatter_gather_bytes: int = 0  # partial bytes one query may gather (0: none, Druid's default)


@dataclass
class _Gathered:
    """A query's partials before the merge (or, `cached_answer`, its whole answer)."""

    partials: list[pa.Table]
    rows: int
    fetched: Sequence[SegmentTask]
    all_cached: bool
    context: dict[str, Any]
    etag: str | None
    cached_answer: bytes | None = None
    one_node_merged: bool = False  # the only partial is a data node's, merged over its segments


class QueryRunner:
    def __init__(
        self,
        view: BrokerServerView,
        client: DataNodeClient,
        *,
        merge_pool: Executor | None = None,
        cache_policy: SegmentCachePolicy | None = None,
        result_cache: ResultLevelCache | None = None,
        limits: RunnerLimits | None = None,
        metrics: BrokerMetrics | None = None,
        merge_processes: MergeProcesses | None = None,
    ):
        self.view = view
        self.planner = SegmentPlanner(view)
        self.client = client
        self.merge_pool = merge_pool
        self.merge_processes = merge_processes  # large merges, off this interpreter
        self.cache_policy: SegmentCachePolicy = cache_policy or NoSegmentCache()
        self.result_cache = result_cache
        self.limits = limits or RunnerLimits()
        self.metrics = metrics
        self._running: dict[str, _Running] = {}

    # -- public -----------------------------------------------------------------------------------
    async def run(self, query: Query, *, as_table: bool = False, sql: SqlAnswer | None = None) -> QueryResult:
        """Run `query`; raises QueryError subclasses (timeout, cancelled, missing segments, limits).
        `as_table`: a scan of a table answers its merged rows as Arrow (`QueryResult.table`), not JSON;
        `sql`: a SQL statement's answer, written from the merged columns where it may be."""
        query_id = query.context.query_id
        if self.metrics is not None:
            self.metrics.native_queries += 1
        task = asyncio.create_task(self._run_with_timeout(query, as_table, sql))
        entry = _Running(task)
        self._running[query_id] = entry
        try:
            return await task
        except asyncio.CancelledError:
            if entry.cancelled and not _current_task_cancelling():
                raise QueryCancelled(f"Query [{query_id}] was cancelled") from None
            raise
        finally:
            if self._running.get(query_id) is entry:
                del self._running[query_id]
            if not task.done():
                task.cancel()
            if task.cancelled() or entry.cancelled:
                self._forward_cancel(query_id, entry)

    def cancel(self, query_id: str) -> bool:
        """Stop a running query here and on every data node it reached."""
        entry = self._running.get(query_id)
        if entry is None:
            return False
        entry.cancelled = True
        entry.task.cancel()
        return True

    def running_query_ids(self) -> list[str]:
        return list(self._running)

    def timeout_ms(self, query: Query) -> int:
        """The query's timeout under the broker's default and maximum (a 400 past the maximum)."""
        return timeout_within(query.context.raw, self.limits.default_timeout_ms, self.limits.max_timeout_ms)

    def gather_budget(self, query: Query) -> GatherBudget | None:
        """What the query may gather from data nodes (a 400 past the broker's limit); None: no limit."""
        limit = scatter_gather_bytes_within(query.context.raw, self.limits.max_scatter_gather_bytes)
        return GatherBudget(limit, query.context.query_id) if limit else None

    # -- internals --------------------------------------------------------------------------------
    async def _run_with_timeout(self, query: Query, as_table: bool, sql: SqlAnswer | None) -> QueryResult:
        timeout_ms = self.timeout_ms(query)
        self.gather_budget(query)  # a context past the broker's limit is a 400 even when the cache answers
        if not timeout_ms:
            return await self._run(query, None, as_table, sql)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_ms / 1000
        try:
            async with asyncio.timeout_at(deadline):
                return await self._run(query, deadline, as_table, sql)
        except TimeoutError:
            entry = self._running.get(query.context.query_id)
            if entry is not None:
                self._forward_cancel(query.context.query_id, entry)
            raise QueryTimeout(f"Query [{query.context.query_id}] timed out after {timeout_ms} ms") from None

    async def _run(
        self, query: Query, deadline: float | None, as_table: bool = False, sql: SqlAnswer | None = None
    ) -> QueryResult:
        if query.source is not None:
            query = await self._resolved_joins(query, deadline)
        if query.inner is not None:  # a query dataSource: the inner query first, then ours over it
            inner = await self._run(query.inner, deadline)
            rows = inner.results if inner.results is not None else orjson.loads(inner.body or b"[]")
            results = await self._off_loop(query, answer_over_rows, query, rows)
            return QueryResult(results, dict(inner.response_context), body=encode_json(results))
        base = leaf(query.data_source_spec)
        if isinstance(base, LookupSource):  # the lookup's k, v rows, answered as inline rows are
            base = lookup_inline(base.name)
        if isinstance(base, InlineSource):  # answered here, as Druid's broker answers inline rows
            results = await self._off_loop(query, answer_over_inline, query, base)
            return QueryResult(results, {}, body=encode_json(results))
        if isinstance(base, UnionSource):
            return await self._union(query, base, deadline)
        gathered = await self._gathered(query, deadline)
        if gathered.cached_answer is not None:
            return QueryResult(None, gathered.context, body=gathered.cached_answer, etag=gathered.etag)
        if as_table and isinstance(query, ScanQuery):
            max_rows = self.limits.max_result_rows
            table = await self._off_loop(query, scan_table, query, gathered.partials, max_rows)
            return QueryResult(None, gathered.context, table=table)
        write = sql if sql is not None and self._writes_sql(query, sql, gathered) else None
        answer, body = await self._merge(
            query, gathered.partials, gathered.rows, gathered.fetched, gathered.all_cached,
            gathered.one_node_merged, write,
        )  # fmt: skip
        if write is not None:
            return QueryResult(None, gathered.context, sql_body=body)
        etag, context = gathered.etag, gathered.context
        if etag is not None and "missingSegments" in context:
            etag = None  # a partial answer is neither cached nor tagged
        if etag is not None and self.result_cache is not None and query.context.populate_result_level_cache:
            await self.result_cache.put(query, etag, body)
        return QueryResult(answer, context, body=body, etag=etag)

    def _writes_sql(self, query: Query, sql: SqlAnswer, gathered: _Gathered) -> bool:
        """Whether the merge writes the SQL answer: a merge off the event loop, of an answer the
        result-level cache is not to keep (it keeps the native one)."""
        populates = gathered.etag is not None and self.result_cache is not None
        populates = populates and query.context.populate_result_level_cache
        off_loop = gathered.rows > INLINE_MERGE_ROWS and not gathered.all_cached
        return off_loop and not populates and not query.context.by_segment and sql.takes(query)

    async def _gathered(self, query: Query, deadline: float | None) -> _Gathered:
        """Every partial of the query's segments: from announced facts, the caches and the data
        nodes (or the whole answer from the result-level cache)."""
        loop = asyncio.get_running_loop()
        plan = self.planner.plan(query)
        context: dict[str, Any] = {}
        if query.context.uncovered_intervals_limit > 0:
            context["uncoveredIntervals"] = [str(i) for i in plan.uncovered]
            context["uncoveredIntervalsOverflowed"] = plan.uncovered_overflowed
        etag = None
        if self.result_cache is not None and result_cacheable(query):
            etag = segments_etag(plan)
            if etag is not None and query.context.use_result_level_cache:
                cached = await self.result_cache.get(query, etag)
                if cached is not None:
                    return _Gathered([], 0, [], False, context, etag, cached)
        by_segment = query.context.by_segment
        tasks: Sequence[SegmentTask] = plan.tasks
        from_metadata: list[pa.Table] = []
        if metadata_answerable(query):
            split = plan.per_view_version(self.view.version, lambda: split_by_facts(plan.tasks))
            counted, tasks, answered = split_metadata_partials(query, split)
            from_metadata = [counted] if counted is not None else []
            if answered:
                log.debug("query %s: %d of %d segments answered from announced row counts and times",
                          query.context.query_id, answered, len(plan.tasks))  # fmt: skip
                if self.metrics is not None:
                    self.metrics.segments_from_metadata.inc(answered)
        lookup = (
            CacheLookup(to_fetch=list(tasks)) if by_segment else await self.cache_policy.lookup(query, tasks)
        )

        def time_left() -> float | None:
            return None if deadline is None else max(0.001, deadline - loop.time())

        entry = self._running.get(query.context.query_id)
        scatter = Scatter(
            self.view,
            self.client,
            on_server_contacted=(lambda s: entry.servers.setdefault(s.name, s)) if entry else None,
            on_response=self._record_node,
            budget=self.gather_budget(query),
        )
        try:
            # per-segment partials only where they are cached, shared with waiters, or asked for
            per_segment = by_segment or bool(lookup.to_populate or lookup.leading)
            gathered = await scatter.gather(query, lookup.to_fetch, time_left, per_segment=per_segment)
            # hand our partials to the queries waiting on them before waiting on others' (no cycles)
            await self.cache_policy.complete(query, lookup, gathered.fetched, gathered.tables)
            shared, unshared = await _wait_shared(lookup.waiting)
            if unshared:  # the query fetching them failed or was cancelled: read them ourselves
                gathered.add(await scatter.gather(query, unshared, time_left, per_segment=False))
        finally:
            self.cache_policy.release(lookup)
        hits = [*lookup.hits, *shared]
        if self.metrics is not None:
            self.metrics.segments_queried.inc(len(plan.tasks))
            self.metrics.retries.inc(gathered.retries)
            self.metrics.missing_segments.inc(len(gathered.missing))
        if gathered.missing:
            self._handle_missing(query, gathered, context)
        rows = sum(t.num_rows for t in [*gathered.tables, *hits, *from_metadata])
        if rows > self.limits.max_gathered_rows:
            raise ResourceLimitExceeded(
                f"Query [{query.context.query_id}] gathered {rows} partial rows from data nodes, over the "
                f"limit of {self.limits.max_gathered_rows}; narrow the intervals or filter"
            )
        partials = [*hits, *gathered.tables, *from_metadata]
        all_cached = bool(hits) and not gathered.tables and not from_metadata and not by_segment
        one_node_merged = not per_segment and len(partials) == 1 and len(gathered.tables) == 1
        return _Gathered(partials, rows, gathered.fetched, all_cached, context, etag, None, one_node_merged)

    async def _resolved_joins(self, query: Query, deadline: float | None) -> Query:
        """`query` with each join's right-side query run and replaced by its rows (inline), as
        Druid's broker runs a join's subqueries before the data nodes see the join."""
        source = query.data_source_spec
        changed = False
        for w in wrappers(source):
            if isinstance(w, JoinSource) and isinstance(w.right, LookupSource):
                source = replace_right(source, w, lookup_inline(w.right.name))
                changed = True
            elif isinstance(w, JoinSource) and isinstance(w.right, QuerySource):
                inner = await self._run(w.right.query, deadline)
                rows = inner.results if inner.results is not None else orjson.loads(inner.body or b"[]")
                inline = inline_of(w.right.query, rows)
                if len(inline.rows) > self.limits.max_join_rows:
                    raise ResourceLimitExceeded(
                        f"The right side of a join gave {len(inline.rows)} rows, over the limit of "
                        f"{self.limits.max_join_rows}"
                    )
                source = replace_right(source, w, inline)
                changed = True
        return dataclasses.replace(query, source=source) if changed else query

    async def _union(self, query: Query, union: UnionSource, deadline: float | None) -> QueryResult:
        """One query per table of a union, their partials merged as one table's would be."""
        partials: list[pa.Table] = []
        context: dict[str, Any] = {}
        for name in union.names:
            source = with_leaf(query.data_source_spec, TableSource(name))
            part = dataclasses.replace(
                query, data_source=name, source=None if source == TableSource(name) else source
            )
            gathered = await self._gathered(part, deadline)
            partials += gathered.partials
            context.update(gathered.context)
        rows = sum(t.num_rows for t in partials)
        answer, body = await self._merge(query, partials, rows, [], all_cached=False)
        return QueryResult(answer, context, body=body)

    async def _merge(
        self,
        query: Query,
        partials: list[pa.Table],
        rows: int,
        fetched: Sequence[SegmentTask],
        all_cached: bool,
        one_node_merged: bool = False,
        write: SqlAnswer | None = None,
    ) -> tuple[list[Any] | None, bytes]:
        """The merged, finalized answer (None: only its encoded bytes) and its JSON (`write`: the
        SQL answer's body instead)."""
        if all_cached:  # every partial a cached one: joined from their remembered rows if it may
            body = await self._from_fragments(query, partials)
            if body is not None:
                return None, body
        if query.context.by_segment:
            return await self._off_loop(query, by_segment_results, query, fetched, partials)
        max_rows = self.limits.max_result_rows
        if rows <= INLINE_MERGE_ROWS:  # a thread hop would cost more than the merge
            return merge_and_finalize(query, partials, max_rows, one_node_merged)
        encode = merge_and_encode if write is None else functools.partial(merge_and_encode, write=write)
        if self.merge_processes is not None and self.merge_processes.takes(rows, query.context.priority):
            if self.metrics is not None:
                self.metrics.process_merges.inc()
            return None, await self.merge_processes.merge(encode, query, partials, max_rows, one_node_merged)
        if write is not None:
            return None, await self._off_loop(query, encode, query, partials, max_rows, one_node_merged)
        return await self._off_loop(query, merge_and_finalize, query, partials, max_rows, one_node_merged)

    async def _from_fragments(self, query: Query, partials: list[pa.Table]) -> bytes | None:
        """The answer joined from cached partials' remembered rows (broker_service.row_fragments);
        partials new to that memo are finalized on the event loop only when a few are."""
        max_rows = self.limits.max_result_rows
        answer = fragment_answer(query, partials, max_rows, new_limit=FRAGMENTS_INLINE_NEW)
        if isinstance(answer, TooManyNew):
            answer = await self._off_loop(query, fragment_answer, query, partials, max_rows)
        return answer if isinstance(answer, bytes) else None

    async def _off_loop(self, query: Query, fn: Callable[..., T], *args: Any) -> T:
        """Work of `query` on the merge threads, or the low-priority ones for a low-priority query."""
        return await run_for_priority(query.context.priority, fn, *args, normal=self.merge_pool)

    def _handle_missing(self, query: Query, gathered: GatherResult, context: dict[str, Any]) -> None:
        descriptors = [t.descriptor.to_json() for t in gathered.missing]
        if gathered.node_failures:  # why: the operator's to read (the client is told which segments)
            reasons = "; ".join(str(f) for f in gathered.node_failures[:5])
            log.warning("query %s: %d segments unread after %d retries; node failures: %s",
                        query.context.query_id, len(gathered.missing), gathered.retries, reasons)  # fmt: skip
        if query.context.return_partial_results:
            context["missingSegments"] = descriptors
            return
        if gathered.last_remote_error is not None:
            raise gathered.last_remote_error
        ids = [t.segment_id for t in gathered.missing]
        raise SegmentsMissing.after_retries(ids, descriptors, gathered.retries)

    def _record_node(self, server: ServerMetadata, seconds: float, ok: bool) -> None:
        if self.metrics is None:
            return
        self.metrics.on_node_request(server.name, seconds, ok)

    def _forward_cancel(self, query_id: str, entry: _Running) -> None:
        servers = list(entry.servers.values())
        entry.servers.clear()
        for server in servers:
            asyncio.get_running_loop().create_task(self.client.cancel(server, query_id))


async def _wait_shared(
    waiting: Sequence[tuple[SegmentTask, SharedPartial]],
) -> tuple[list[pa.Table], list[SegmentTask]]:
    """Partials fetched for us by other queries, and the segments whose fetch came to nothing."""
    if not waiting:
        return [], []
    # shield: this query being cancelled must not cancel a future other queries wait on too
    parts = await asyncio.gather(*(asyncio.shield(future) for _, future in waiting))
    shared = [p for p in parts if p is not None]
    unshared = [task for (task, _), p in zip(waiting, parts, strict=True) if p is None]
    return shared, unshared


def _current_task_cancelling() -> bool:
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0
