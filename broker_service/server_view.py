"""The broker's view of the cluster: which server serves which segment, one timeline per datasource.

A timeline chunk is a `ServerSelector`: one segment plus every server announcing it. A segment
enters its timeline when the first server announces it and leaves when the last one drops it.

A segment whose last server *vanished* (died, lost its session, stopped answering) is different
from one its server dropped on purpose: the data still exists and another node is about to load
it. Such a segment stays in its timeline as *lost* (a selector with no server) for a grace
period, so queries over it report it missing (an error, or a flagged partial answer) instead of
silently answering without it. It is served again as soon as any server announces it.
Every mutation and every read happens on the event loop thread (inventories marshal their
callbacks there), so a query always sees a consistent timeline without locks — the global lock
of Druid's BrokerServerView is what stalled its queries during segment churn.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import Protocol

from broker_service.inflight import InflightCalls
from strata.discovery.server_metadata import ServerMetadata
from timeline import DataSegment, RowFacts, VersionedIntervalTimeline


class LoadGauge(Protocol):
    def open_connections(self, server_name: str) -> int: ...


class _NoLoad:
    def open_connections(self, server_name: str) -> int:
        return 0


NO_LOAD: LoadGauge = _NoLoad()


class ServerSelector:
    """One segment and the servers announcing it; picks one server per query.

    The servers and what each announced are two parallel tuples, not two dicts: a broker holds one
    selector per segment (100,000 of them in the many-small-segments case), and nearly all have one
    or two servers, which tuples hold in a fraction of a dict's memory; they change rarely.
    What each server announced is kept only when it differs from the segment's own facts (almost
    never: replicas announce the very same segment), and the agreed facts are read from the
    segment when asked, not held: a million selectors held 100 B each of copies. Whether a
    historical serves it and which facts all servers agree on are read from these tuples when
    asked (two slots fewer, 16 B of each of a million selectors)."""

    __slots__ = ("_facts", "_preferred", "_servers", "segment")

    def __init__(self, segment: DataSegment):
        self.segment = segment
        self._servers: tuple[ServerMetadata, ...] = ()
        # what each of `_servers` announced, `_OWN` for the segment's own facts; None: all `_OWN`
        self._facts: tuple[object, ...] | None = None
        self._preferred: tuple[ServerMetadata, ...] = ()  # what `pick` ranks when nothing is excluded

    @property
    def servers(self) -> Mapping[str, ServerMetadata]:
        return MappingProxyType({s.name: s for s in self._servers})

    @property
    def server_count(self) -> int:
        return len(self._servers)

    def set_server(self, server: ServerMetadata, announced: DataSegment | None = None) -> None:
        """`announced`: the segment as this server announced it (None: a server re-described)."""
        servers = self._servers
        if announced is self.segment and self._facts is None and all(s.name != server.name for s in servers):
            # a further replica of the very segment held, the common case: nothing to compare
            self._servers = (*servers, server)
            self._servers_changed()
            return
        names = [s.name for s in self._servers]
        every = self._every_facts()
        facts = _OWN if announced is None else self._facts_of(announced)
        if server.name in names:
            i = names.index(server.name)
            facts = every[i] if announced is None else facts
            self._servers = (*self._servers[:i], server, *self._servers[i + 1 :])
            every = (*every[:i], facts, *every[i + 1 :])
        else:
            self._servers = (*self._servers, server)
            every = (*every, facts)
        self._keep_facts(every)
        self._servers_changed()

    def _every_facts(self) -> tuple[object, ...]:
        return (_OWN,) * len(self._servers) if self._facts is None else self._facts

    def _keep_facts(self, every: tuple[object, ...]) -> None:
        self._facts = None if all(f is _OWN for f in every) else every

    def _facts_of(self, announced: DataSegment) -> object:
        if announced is self.segment:
            return _OWN
        facts = RowFacts.of(announced)
        return _OWN if facts == RowFacts.of(self.segment) else facts

    def remove_server(self, name: str) -> None:
        keep = [i for i, s in enumerate(self._servers) if s.name != name]
        if len(keep) != len(self._servers):
            every = self._every_facts()
            self._servers = tuple(self._servers[i] for i in keep)
            self._keep_facts(tuple(every[i] for i in keep))
        self._servers_changed()

    def _servers_changed(self) -> None:
        self._preferred = _preferred(self._servers)

    @property
    def row_facts(self) -> RowFacts | None:
        """The segment's row count and time span, when every server serving it is a historical
        and all announced the same ones (None otherwise: a real-time node's rows still change)."""
        servers = self._servers
        if not servers or not all(s.is_historical for s in servers):
            return None
        facts = set(self._every_facts())
        only = facts.pop() if len(facts) == 1 else None
        if only is _OWN:
            return RowFacts.of(self.segment)
        assert only is None or isinstance(only, RowFacts)
        return only

    @property
    def is_historical(self) -> bool:
        """Served by at least one historical: its partial results are immutable and cacheable.
        The preferred servers are historicals whenever any serves it (every query asks this of
        every segment it reads: one look at a tuple)."""
        preferred = self._preferred
        return bool(preferred) and preferred[0].is_historical

    def pick(
        self,
        load: LoadGauge = NO_LOAD,
        exclude: Collection[str] = (),
        rng: random.Random | None = None,
    ) -> ServerMetadata | None:
        """Historicals before realtime, highest tier priority, fewest open connections, random tie."""
        if len(self._servers) == 1:  # one replica, the common case: nothing to rank (100 picks a query)
            (only,) = self._servers
            return None if only.name in exclude else only
        # the first try (every segment of every query) takes the ranking made when the servers
        # changed; a retry ranks afresh without the servers it excludes
        pool: Sequence[ServerMetadata] = (
            _preferred([s for s in self._servers if s.name not in exclude]) if exclude else self._preferred
        )
        if len(pool) == 2:  # two replicas, the usual case: compared without lists (100 picks a query)
            first, second = pool
            if load is not NO_LOAD:
                a, b = load.open_connections(first.name), load.open_connections(second.name)
                if a != b:
                    return first if a < b else second
            return first if (rng or random).random() < 0.5 else second
        if not pool:
            return None
        if len(pool) > 1:
            counts = [load.open_connections(s.name) for s in pool]
            least = min(counts)
            pool = [s for s, c in zip(pool, counts, strict=True) if c == least]
        return (rng or random).choice(pool) if len(pool) > 1 else pool[0]

    def __repr__(self) -> str:
        return f"ServerSelector({self.segment.id}, {sorted(s.name for s in self._servers)})"


_OWN = object()  # a server announced the facts of the segment its selector holds


def _preferred(servers: Collection[ServerMetadata]) -> tuple[ServerMetadata, ...]:
    """Historicals before real-time nodes, then the highest tier priority; `servers` itself when
    that is all of them (the common case: no second tuple per selector)."""
    if isinstance(servers, tuple) and servers:  # the common case, told without lists
        top = servers[0].priority
        if all(s.is_historical and s.priority == top for s in servers):
            return servers
    historicals = [s for s in servers if s.is_historical]
    pool = historicals or list(servers)
    if not pool:
        return ()
    top = max(s.priority for s in pool)
    ranked = tuple(s for s in pool if s.priority == top)
    return servers if isinstance(servers, tuple) and len(ranked) == len(servers) else ranked


SegmentRemovedListener = Callable[[DataSegment], None]


class BrokerServerView:
    def __init__(self, *, lost_segment_grace_s: float = 300.0, clock: Callable[[], float] = time.monotonic):
        self.lost_segment_grace_s = lost_segment_grace_s
        self._clock = clock
        self._lost: dict[str, float] = {}  # segment id -> when its last server vanished (insertion-ordered)
        self._servers: dict[str, ServerMetadata] = {}
        self._served: dict[str, dict[str, DataSegment]] = {}  # server name -> segment id -> segment
        self._selectors: dict[str, ServerSelector] = {}  # segment id -> selector
        self._timelines: dict[str, VersionedIntervalTimeline[ServerSelector]] = {}
        self._removal_listeners: list[SegmentRemovedListener] = []
        self.inflight = InflightCalls()  # requests to each server, cancelled when it leaves
        self.version = 0  # bumped on every change, for cheap "did anything change" checks

    # -- servers ----------------------------------------------------------------------------------
    def add_server(self, server: ServerMetadata) -> None:
        """Register (or re-describe) a server; its segments keep being served."""
        if self._servers.get(server.name) == server:
            return  # the inventory repeats every server on each change of the set: a thousand nodes
        self._servers[server.name] = server
        served = self._served.setdefault(server.name, {})
        for segment_id in served:
            self._selectors[segment_id].set_server(server)
        self.version += 1

    def remove_server(self, name: str) -> None:
        """The server vanished: segments it alone served become lost, not gone (see module doc)."""
        for segment_id in list(self._served.get(name, ())):
            self.remove_segment(name, segment_id, vanished=True)
        self._served.pop(name, None)
        self._servers.pop(name, None)
        self.inflight.cancel_server(name)
        self.version += 1

    def server(self, name: str) -> ServerMetadata | None:
        return self._servers.get(name)

    def servers(self) -> list[ServerMetadata]:
        return list(self._servers.values())

    # -- segments ---------------------------------------------------------------------------------
    def add_segment(self, server_name: str, segment: DataSegment) -> None:
        server = self._servers.get(server_name)
        if server is None:
            server = self._servers[server_name] = ServerMetadata(server_name, server_name)
        served = self._served.setdefault(server_name, {})
        if segment.id in served:
            return
        self._lost.pop(segment.id, None)
        selector = self._selectors.get(segment.id)
        if selector is None:
            selector = self._selectors[segment.id] = ServerSelector(segment)
            timeline = self._timelines.get(segment.data_source)
            if timeline is None:
                timeline = self._timelines[segment.data_source] = VersionedIntervalTimeline()
            timeline.add_segment(segment, selector)
        # every replica announcing the very same segment shares one object (Druid interns them
        # too): a million segments on two nodes each are then a million objects, not two
        shared = selector.segment
        announced = shared if shared.same_announcement(segment) else segment
        served[shared.id] = announced
        selector.set_server(server, announced)
        self.version += 1

    def remove_segment(self, server_name: str, segment_id: str, *, vanished: bool = False) -> None:
        served = self._served.get(server_name)
        if not served or served.pop(segment_id, None) is None:
            return
        selector = self._selectors.get(segment_id)
        if selector is None:
            return
        selector.remove_server(server_name)
        if not selector.server_count:
            if vanished and self.lost_segment_grace_s > 0:
                self._lost[segment_id] = self._clock()
            else:
                self._forget(selector)
        self.version += 1

    def _forget(self, selector: ServerSelector) -> None:
        segment = selector.segment
        del self._selectors[segment.id]
        self._lost.pop(segment.id, None)
        timeline = self._timelines.get(segment.data_source)
        if timeline is not None:
            timeline.remove_segment(segment, selector)
            if timeline.is_empty():
                del self._timelines[segment.data_source]
        for listener in self._removal_listeners:
            listener(segment)

    def expire_lost_segments(self) -> int:
        """Forget lost segments older than the grace period; cheap when there is nothing to do."""
        if not self._lost:
            return 0
        deadline = self._clock() - self.lost_segment_grace_s
        expired = []
        for segment_id, since in self._lost.items():
            if since > deadline:
                break  # insertion order is time order
            expired.append(segment_id)
        for segment_id in expired:
            selector = self._selectors.get(segment_id)
            if selector is not None and not selector.server_count:
                self._forget(selector)
            self._lost.pop(segment_id, None)
        if expired:
            self.version += 1
        return len(expired)

    @property
    def lost_segment_count(self) -> int:
        return len(self._lost)

    def sync_server(self, server_name: str, segments: Iterable[DataSegment]) -> None:
        """Make `server_name` serve exactly `segments` (a full snapshot), touching only the difference."""
        wanted = {s.id: s for s in segments}
        current = self._served.get(server_name, {})
        for segment_id in [i for i in current if i not in wanted]:
            self.remove_segment(server_name, segment_id)
        for segment_id, segment in wanted.items():
            if segment_id not in current:
                self.add_segment(server_name, segment)
        if server_name not in self._servers:
            self._servers[server_name] = ServerMetadata(server_name, server_name)
            self._served.setdefault(server_name, {})

    def segments_of(self, server_name: str) -> dict[str, DataSegment]:
        return dict(self._served.get(server_name, {}))

    def on_segment_removed(self, listener: SegmentRemovedListener) -> None:
        """Called when the last server drops a segment (e.g. to close its cache namespace)."""
        self._removal_listeners.append(listener)

    # -- reads ------------------------------------------------------------------------------------
    def timeline(self, data_source: str) -> VersionedIntervalTimeline[ServerSelector] | None:
        self.expire_lost_segments()
        return self._timelines.get(data_source)

    def serves(self, data_source: str) -> bool:
        """Whether some segment of `data_source` is in the view (or was, within the lost grace)."""
        return data_source in self._timelines

    def data_sources(self) -> list[str]:
        self.expire_lost_segments()
        return sorted(self._timelines)

    def selector(self, segment_id: str) -> ServerSelector | None:
        return self._selectors.get(segment_id)

    def held_segment(self, segment_id: str) -> DataSegment | None:
        """The segment held under `segment_id`, if any. The one read safe from another thread (an
        inventory's, to compare a replica's announcement with it before parsing it): one lookup
        in a dict only the loop changes, giving an immutable segment or nothing."""
        selector = self._selectors.get(segment_id)
        return None if selector is None else selector.segment

    def selectors(self) -> Iterator[ServerSelector]:
        return iter(self._selectors.values())

    @property
    def segment_count(self) -> int:
        """Segments some server serves now (lost ones are counted apart)."""
        return len(self._selectors) - len(self._lost)
