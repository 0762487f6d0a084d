"""Server selection and the timeline view kept per server."""

from __future__ import annotations

import random
from collections import Counter

from broker_service.data_server import DataServer
from broker_service.server_view import BrokerServerView, ServerSelector
from tests.broker.helpers import segment
from timeline import Interval

H1 = DataServer("h1:8083", "h1:8083", "historical", "_default_tier", 0)
H2 = DataServer("h2:8083", "h2:8083", "historical", "_default_tier", 0)
HOT = DataServer("hot:8083", "hot:8083", "historical", "hot", 10)
RT = DataServer("rt:8100", "rt:8100", "realtime", "_default_tier", 100)


class FakeLoad:
    def __init__(self, counts: dict[str, int]):
        self.counts = counts

    def open_connections(self, server_name: str) -> int:
        return self.counts.get(server_name, 0)


def selector(*servers: DataServer) -> ServerSelector:
    s = ServerSelector(segment())
    for server in servers:
        s.servers[server.name] = server
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


def test_remove_server_drops_only_its_segments():
    view = BrokerServerView()
    a, b = segment(interval="2015-09-12/2015-09-13"), segment(interval="2015-09-13/2015-09-14")
    view.add_server(H1)
    view.add_server(H2)
    view.add_segment("h1:8083", a)
    view.add_segment("h1:8083", b)
    view.add_segment("h2:8083", b)
    view.remove_server("h1:8083")
    holders = view.timeline("wiki").lookup(Interval.parse("2015-09-01/2015-10-01"))
    assert [h.interval for h in holders] == [b.interval]
    assert view.segment_count == 1
    assert view.server("h1:8083") is None


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
    view.add_server(DataServer("h1:8083", "h1:8083", "historical", "hot", 5))
    assert view.selector(segment().id).servers["h1:8083"].priority == 5
