"""Server selection and the timeline view kept per server."""

from __future__ import annotations

import dataclasses
import random
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from broker_service.server_view import BrokerServerView, ServerSelector
from strata.discovery.server_metadata import ServerMetadata, ServerType
from tests.broker.helpers import segment
from timeline import Interval, RowFacts

H1 = ServerMetadata("h1:8083", "h1:8083", ServerType.HISTORICAL, "_default_tier", 0)
H2 = ServerMetadata("h2:8083", "h2:8083", ServerType.HISTORICAL, "_default_tier", 0)
HOT = ServerMetadata("hot:8083", "hot:8083", ServerType.HISTORICAL, "hot", 10)
RT = ServerMetadata("rt:8100", "rt:8100", ServerType.REALTIME, "_default_tier", 100)


class FakeLoad:
    def __init__(self, counts: dict[str, int]):
        self.counts = counts

    def open_connections(self, server_name: str) -> int:
        return self.counts.get(server_name, 0)


def selector(*servers: ServerMetadata) -> ServerSelector:
    s = ServerSelector(segment())
    for server in servers:
        s.set_server(server)
    return s


def test_historical_preferred_over_realtime_even_with_higher_priority():
    assert selector(RT, H1).pick() == H1


def test_realtime_used_when_no_historical_has_the_segment():
    assert selector(RT).pick() == RT


def test_highest_tier_priority_first():
    assert selector(H1, HOT, H2).pick() == HOT


def test_fewest_open_connections_wins():
    assert selector(H1, H2).pick(FakeLoad({"h1:8083": 3, "h2:8083": 1})) == H2


def test_random_tie_break_spreads_load():
    s = selector(H1, H2)
    rng = random.Random(7)
    picks = Counter(s.pick(rng=rng).name for _ in range(400))
    assert set(picks) == {"h1:8083", "h2:8083"}
    assert min(picks.values()) > 100


def test_exclude_moves_to_next_replica_then_none():
    s = selector(H1, H2)
    assert s.pick(exclude={"h1:8083"}) == H2
    assert s.pick(exclude={"h1:8083", "h2:8083"}) is None


def test_a_lone_replica_is_picked_unless_excluded():
    assert selector(H1).pick() == H1 and selector(RT).pick() == RT
    assert selector(H1).pick(exclude={"h1:8083"}) is None


def test_segment_enters_with_first_server_and_leaves_with_last():
    view = BrokerServerView()
    view.add_server(H1)
    view.add_server(H2)
    seg = segment()
    removed = []
    view.on_segment_removed(removed.append)
    view.add_segment("h1:8083", seg)
    view.add_segment("h2:8083", seg)
    holders = view.timeline("wiki").lookup(Interval.parse("2015-09-12/2015-09-13"))
    assert len(holders) == 1 and set(holders[0].objects[0].servers) == {"h1:8083", "h2:8083"}
    view.remove_segment("h1:8083", seg.id)
    holders = view.timeline("wiki").lookup(Interval.parse("2015-09-12/2015-09-13"))
    assert set(holders[0].objects[0].servers) == {"h2:8083"}
    assert removed == []
    view.remove_segment("h2:8083", seg.id)
    assert view.timeline("wiki") is None
    assert view.data_sources() == []
    assert removed == [seg]


def test_remove_server_drops_only_its_segments_when_lost_segments_are_not_kept():
    view = BrokerServerView(lost_segment_grace_s=0)
    a, b = segment(interval="2015-09-12/2015-09-13"), segment(interval="2015-09-13/2015-09-14")
    view.add_server(H1)
    view.add_server(H2)
    view.add_segment("h1:8083", a)
    view.add_segment("h1:8083", b)
    view.add_segment("h2:8083", b)
    view.remove_server("h1:8083")
    holders = view.timeline("wiki").lookup(Interval.parse("2015-09-01/2015-10-01"))
    assert [h.interval for h in holders] == [b.interval]
    assert view.segment_count == 1 and view.lost_segment_count == 0
    assert view.server("h1:8083") is None


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_segments_of_a_vanished_server_stay_visible_as_lost_until_reannounced():
    clock = FakeClock()
    view = BrokerServerView(lost_segment_grace_s=60, clock=clock)
    a, b = segment(interval="2015-09-12/2015-09-13"), segment(interval="2015-09-13/2015-09-14")
    view.add_segment("h1:8083", a)
    view.add_segment("h1:8083", b)
    view.add_segment("h2:8083", b)
    view.remove_server("h1:8083")
    holders = view.timeline("wiki").lookup(Interval.parse("2015-09-01/2015-10-01"))
    assert [h.interval for h in holders] == [a.interval, b.interval]  # a is still there, unserved
    lost = holders[0].objects[0]
    assert lost.servers == {} and lost.pick() is None
    assert view.segment_count == 1 and view.lost_segment_count == 1
    clock.now += 30
    view.add_segment("h2:8083", a)  # the survivor loaded it
    assert view.selector(a.id) is lost and set(lost.servers) == {"h2:8083"}
    assert view.segment_count == 2 and view.lost_segment_count == 0
    clock.now += 1000
    assert view.expire_lost_segments() == 0 and view.selector(a.id) is lost


def test_lost_segments_are_forgotten_after_the_grace_period():
    clock = FakeClock()
    view = BrokerServerView(lost_segment_grace_s=60, clock=clock)
    removed = []
    view.on_segment_removed(removed.append)
    a, b = segment(interval="2015-09-12/2015-09-13"), segment(interval="2015-09-13/2015-09-14")
    view.add_segment("h1:8083", a)
    view.remove_server("h1:8083")
    clock.now += 30
    view.add_segment("h2:8083", b)
    view.remove_server("h2:8083")
    clock.now += 45  # a lost 75 s ago, b 45 s ago
    assert [h.interval for h in view.timeline("wiki").lookup(Interval.parse("2015-09-01/2015-10-01"))] == [
        b.interval
    ]
    assert removed == [a] and view.lost_segment_count == 1
    clock.now += 20
    assert view.timeline("wiki") is None and removed == [a, b]


def test_a_segment_dropped_on_purpose_is_gone_at_once():
    view = BrokerServerView(lost_segment_grace_s=60)
    a = segment()
    view.add_segment("h1:8083", a)
    view.remove_segment("h1:8083", a.id)
    assert view.timeline("wiki") is None and view.lost_segment_count == 0


def test_newer_version_overshadows_older_across_servers():
    view = BrokerServerView()
    old, new = segment(version="v1"), segment(version="v2")
    view.add_segment("h1:8083", old)
    view.add_segment("h2:8083", new)
    holders = view.timeline("wiki").lookup(Interval.parse("2015-09-12/2015-09-13"))
    assert [h.version for h in holders] == ["v2"]
    view.remove_segment("h2:8083", new.id)
    holders = view.timeline("wiki").lookup(Interval.parse("2015-09-12/2015-09-13"))
    assert [h.version for h in holders] == ["v1"]


def test_incomplete_partition_set_is_not_visible_until_complete():
    view = BrokerServerView()
    p0 = segment(part=0, partitions=2)
    p1 = segment(part=1, partitions=2)
    view.add_segment("h1:8083", p0)
    assert view.timeline("wiki").lookup(Interval.parse("2015-09-12/2015-09-13")) == []
    view.add_segment("h2:8083", p1)
    holders = view.timeline("wiki").lookup(Interval.parse("2015-09-12/2015-09-13"))
    assert sorted(c.chunk_number for c in holders[0].chunks) == [0, 1]


def test_sync_server_applies_only_the_difference():
    view = BrokerServerView()
    a, b, c = (segment(interval=f"2015-09-{d}/2015-09-{d + 1}") for d in (12, 13, 14))
    view.sync_server("h1:8083", [a, b])
    sel_a = view.selector(a.id)
    view.sync_server("h1:8083", [a, c])
    assert view.selector(a.id) is sel_a  # untouched
    assert view.selector(b.id) is None
    assert set(view.segments_of("h1:8083")) == {a.id, c.id}


def test_server_metadata_update_reaches_selectors():
    view = BrokerServerView()
    view.add_server(H1)
    view.add_segment("h1:8083", segment())
    view.add_server(ServerMetadata("h1:8083", "h1:8083", ServerType.HISTORICAL, "hot", 5))
    assert view.selector(segment().id).servers["h1:8083"].priority == 5


def _oracle_candidates(servers: list[ServerMetadata], exclude: set[str]) -> set[str]:
    """The selection rules in plain Python: not excluded, historicals if any, top priority."""
    pool = [s for s in servers if s.name not in exclude]
    historicals = [s for s in pool if s.type in (ServerType.HISTORICAL, ServerType.BRIDGE)]
    pool = historicals or pool
    top = max((s.priority for s in pool), default=None)
    return {s.name for s in pool if s.priority == top}


def test_pick_matches_the_rules_over_random_server_sets_exclusions_and_changes():
    rng = random.Random(40)
    for _ in range(300):
        kinds = [ServerType.HISTORICAL, ServerType.REALTIME]
        servers = [
            ServerMetadata(f"n{i}:1", f"n{i}:1", rng.choice(kinds), "_default_tier", rng.choice([0, 0, 5]))
            for i in range(rng.randint(1, 4))
        ]
        s = selector(*servers)
        if rng.random() < 0.5:  # a server leaves: the ranking follows
            gone = servers.pop(rng.randrange(len(servers)))
            s.remove_server(gone.name)
        exclude = {x.name for x in servers if rng.random() < 0.3}
        expected = _oracle_candidates(servers, exclude)
        picked = {p.name for p in (s.pick(exclude=exclude, rng=rng) for _ in range(40)) if p is not None}
        assert picked == expected  # every allowed server, and only those, over 40 random ties


def test_replicas_announcing_the_same_segment_share_one_object_and_one_row_facts():
    view = BrokerServerView()
    facts = {"numRows": 7, "minTime": 1, "maxTime": 9}
    first = dataclasses.replace(segment(), extra=facts)
    second = dataclasses.replace(segment(), extra=dict(facts))  # equal, not the same object
    view.add_segment(H1.name, first)
    view.add_segment(H2.name, second)
    assert view.segments_of(H2.name)[first.id] is first
    sel = view.selector(first.id)
    assert sel is not None and sel.row_facts == RowFacts(7, (1, 9))
    assert sel._facts is None  # nothing held per server: both announced the segment's own facts


def test_a_replica_announcing_other_details_keeps_its_own():
    view = BrokerServerView()
    first = segment()
    bigger = dataclasses.replace(segment(), size=first.size + 1)
    view.add_segment(H1.name, first)
    view.add_segment(H2.name, bigger)
    assert view.segments_of(H2.name)[first.id].size == first.size + 1
    assert view.segments_of(H1.name)[first.id].size == first.size


def test_row_facts_only_while_every_server_is_a_historical_announcing_the_same():
    view = BrokerServerView()
    for server in (H1, H2, RT):
        view.add_server(server)
    agreed = dataclasses.replace(segment(), extra={"numRows": 7, "minTime": 1, "maxTime": 9})
    other = dataclasses.replace(segment(), extra={"numRows": 8, "minTime": 1, "maxTime": 9})
    view.add_segment(H1.name, agreed)
    sel = view.selector(agreed.id)
    assert sel is not None and sel.row_facts == RowFacts(7, (1, 9))
    view.add_segment(H2.name, other)
    assert sel.row_facts is None  # the replicas disagree
    view.remove_segment(H1.name, agreed.id)
    assert sel.row_facts == RowFacts(8, (1, 9))  # only H2's facts are left
    view.add_segment(H1.name, agreed)
    view.remove_segment(H2.name, agreed.id)
    assert sel.row_facts == RowFacts(7, (1, 9))
    view.add_segment(RT.name, agreed)
    assert sel.row_facts is None  # a real-time node's rows still change
    view.remove_segment(RT.name, agreed.id)
    view.add_server(H1)  # re-described: what it announced is kept
    assert sel.row_facts == RowFacts(7, (1, 9))


@settings(max_examples=200, deadline=None)  # timing is not what it checks (a busy CI)
@given(
    st.lists(st.tuples(st.sampled_from(list(ServerType)), st.integers(0, 2), st.integers(0, 3)), max_size=4),
    st.dictionaries(st.sampled_from(["h0", "h1", "h2", "h3"]), st.integers(0, 2)),
    st.lists(st.integers(0, 3), max_size=3),
)
def test_picks_and_kinds_follow_a_plain_ranking(
    servers: list[tuple[ServerType, int, int]], load: dict[str, int], removed: list[int]
) -> None:
    """Oracle: historicals (and bridges) first, then the highest priority, then the fewest open
    connections; `is_historical` is whether any server of the segment is one."""
    s = ServerSelector(segment())
    held: dict[str, ServerMetadata] = {}
    for kind, priority, n in servers:
        server = ServerMetadata(f"h{n}", f"h{n}", kind, "_default_tier", priority)
        s.set_server(server)
        held[server.name] = server
    for n in removed:
        s.remove_server(f"h{n}")
        held.pop(f"h{n}", None)
    replication = {ServerType.HISTORICAL.value, ServerType.BRIDGE.value}
    assert s.is_historical == any(str(m.type) in replication for m in held.values())
    pool = [m for m in held.values() if str(m.type) in replication] or list(held.values())
    top = max((m.priority for m in pool), default=0)
    pool = [m for m in pool if m.priority == top]
    least = min((load.get(m.name, 0) for m in pool), default=0)
    expected = {m.name for m in pool if load.get(m.name, 0) == least}
    picks = {
        p.name for p in (s.pick(FakeLoad(load), rng=random.Random(i)) for i in range(100)) if p is not None
    }
    assert picks == expected
