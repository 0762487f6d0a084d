"""Scatter a query over data servers and gather partials, retrying on replicas.

Each round groups segments by the server picked for them (one request per server naming exactly
its segments) and runs the requests concurrently. Segments a server reported missing, and all
segments of a server that failed (refused, died mid-response, 5xx), go to another replica in the
next round, up to `numRetriesOnMissingSegments` extra rounds. Whatever is still unread at the end
is returned as missing; the caller decides between an error and a flagged partial answer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import pyarrow as pa

from broker_service.data_node_client import DataNodeClient, GatherBudget, NodeResponse
from broker_service.errors import NodeFailure
from broker_service.inflight import ServerLeft
from broker_service.segment_plan import SegmentTask
from broker_service.server_view import NO_LOAD, BrokerServerView, LoadGauge
from strata.discovery.server_metadata import ServerMetadata
from strata.query import Query
from strata.query.errors import QueryError


@dataclass
class GatherResult:
    tables: list[pa.Table] = field(default_factory=list)
    fetched: list[SegmentTask] = field(default_factory=list)  # segments some server answered
    missing: list[SegmentTask] = field(default_factory=list)
    last_remote_error: QueryError | None = None
    retries: int = 0
    node_failures: list[NodeFailure] = field(default_factory=list)

    def add(self, other: GatherResult) -> None:
        """Fold a later gather (e.g. segments another query failed to share) into this one."""
        self.tables += other.tables
        self.fetched += other.fetched
        self.missing += other.missing
        self.last_remote_error = other.last_remote_error or self.last_remote_error
        self.retries += other.retries
        self.node_failures += other.node_failures


class Scatter:
    def __init__(
        self,
        view: BrokerServerView,
        client: DataNodeClient,
        *,
        on_server_contacted: Callable[[ServerMetadata], object] | None = None,
        on_response: Callable[[ServerMetadata, float, bool], None] | None = None,
        budget: GatherBudget | None = None,  # the query's maxScatterGatherBytes, over every gather
    ):
        self.view = view
        self.client = client
        self.on_server_contacted = on_server_contacted
        self.on_response = on_response
        self.budget = budget

    async def gather(
        self,
        query: Query,
        tasks: Sequence[SegmentTask],
        time_left: Callable[[], float | None],
        *,
        per_segment: bool = True,
    ) -> GatherResult:
        out = GatherResult()
        tried: dict[tuple[str, SegmentTaskKey], set[str]] = {}
        pending = list(tasks)
        retries_left = query.context.num_retries_on_missing_segments
        while pending:
            groups, unread = group_by_server(pending, self.client, tried)
            calls = [
                self._call(server, query, group, time_left(), per_segment)
                for server, group in groups.values()
            ]
            responses = await asyncio.gather(*calls, return_exceptions=True)
            for (server, group), response in zip(groups.values(), responses, strict=True):
                failed: list[SegmentTask] = []
                if isinstance(response, NodeFailure):
                    out.node_failures.append(response)
                    if response.remote is not None:
                        out.last_remote_error = response.remote
                    failed = group
                elif isinstance(response, BaseException):
                    raise response
                else:
                    if response.missing:
                        missing = set(response.missing)
                        failed = [t for t in group if t.descriptor in missing]
                        out.fetched.extend(t for t in group if t.descriptor not in missing)
                    else:
                        out.fetched.extend(group)
                    if response.table is not None and response.table.num_rows:
                        out.tables.append(response.table)
                for task in failed:
                    tried.setdefault((task.segment_id, _key(task)), set()).add(server.name)
                unread.extend(failed)
            if not unread or retries_left <= 0:
                out.missing = unread
                break
            retries_left -= 1
            out.retries += 1
            pending = [self._current(task) for task in unread]
        return out

    def _current(self, task: SegmentTask) -> SegmentTask:
        """The view may have changed since planning: a re-announced segment has a new selector."""
        selector = self.view.selector(task.segment_id)
        if selector is None or selector is task.selector:
            return task
        return SegmentTask(selector, task.descriptor)

    async def _call(
        self,
        server: ServerMetadata,
        query: Query,
        group: list[SegmentTask],
        timeout_s: float | None,
        per_segment: bool,
    ) -> NodeResponse:
        if self.on_server_contacted is not None:
            self.on_server_contacted(server)
        loop = asyncio.get_running_loop()
        started = loop.time()
        ok = False
        try:
            descriptors = [t.descriptor for t in group]
            call = self.client.run(
                server, query, descriptors, timeout_s, per_segment=per_segment, budget=self.budget
            )
            try:
                response = await self.view.inflight.run(server.name, call)
            except ServerLeft:
                raise NodeFailure(server.name, "left the cluster while the query waited on it") from None
            ok = True
            return response
        finally:
            if self.on_response is not None:
                self.on_response(server, loop.time() - started, ok)


SegmentTaskKey = tuple[int, int, str, int]
ServerGroups = dict[str, tuple[ServerMetadata, list[SegmentTask]]]


def group_by_server(
    tasks: Sequence[SegmentTask],
    load: LoadGauge = NO_LOAD,
    tried: Mapping[tuple[str, SegmentTaskKey], set[str]] | None = None,
) -> tuple[ServerGroups, list[SegmentTask]]:
    """One round's routing: a server picked per segment (not one in `tried` for it), segments
    grouped by server; and the segments no server is left for."""
    groups: ServerGroups = {}
    unread: list[SegmentTask] = []
    for task in tasks:
        # the servers tried are recorded only for segments left unread (a retry excludes them):
        # per segment, the common first round costs a pick and an append
        exclude = tried.get((task.segment_id, _key(task)), ()) if tried else ()
        server = task.selector.pick(load, exclude=exclude)
        if server is None:
            unread.append(task)
            continue
        slot = groups.get(server.name)
        if slot is None:
            slot = groups[server.name] = (server, [])
        slot[1].append(task)
    return groups, unread


def _key(task: SegmentTask) -> SegmentTaskKey:
    d = task.descriptor
    return (d.interval.start, d.interval.end, d.version, d.partition)
