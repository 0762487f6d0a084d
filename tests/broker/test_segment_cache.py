"""The per-segment cache policy in the query path (in-memory bulk cache; fake data nodes)."""

from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass

import pyarrow as pa

from broker_service.data_server import DataServer
from broker_service.segment_cache import SegmentCache, decode_partial, encode_partial, segment_cache_key
from broker_service.segment_plan import SegmentTask
from broker_service.server_view import ServerSelector
from tests.broker.helpers import run, segment, sum_query
from tests.broker.test_query_runner import DAYS, WEEK, Cluster, oracle


@dataclass(frozen=True)
class Key:
    namespace: str
    key: bytes


class DictCache:
    def __init__(self):
        self.data: dict[Key, bytes] = {}

    async def aget_many(self, keys):
        return {k: self.data[k] for k in keys if k in self.data}

    async def aput_many(self, items):
        self.data.update(items)


async def runs(runner, *queries):
    """Several queries on one event loop (the runner's HTTP pool belongs to a loop)."""
    return [(await runner.run(q)).results for q in queries]


def test_second_query_is_answered_from_cache_with_the_same_result():
    with ExitStack() as stack:
        c = Cluster(stack)
        _, node = c.node(serves=DAYS)
        cache = DictCache()
        policy = SegmentCache(cache, Key)
        runner = c.runner(cache_policy=policy)
        first, second, _ = run(
            runs(runner, sum_query(WEEK), sum_query(WEEK), sum_query("2015-09-01T12:00:00Z/2015-09-03"))
        )
        assert first == [oracle(DAYS)]
        assert {k.namespace for k in cache.data} == {s.id for s in DAYS} | {DAYS[0].id}
        assert second == first
        assert policy.stats["hits"] == len(DAYS) + 1  # second query all, third query the whole day 2
        # the narrower interval clips day 1: a different key, fetched again
        assert len(node.requests) == 2
        assert [d["itvl"] for d in node.requests[-1]["intervals"]["segments"]] == [
            "2015-09-01T12:00:00.000Z/2015-09-02T00:00:00.000Z"
        ]


def test_use_cache_false_and_populate_false_are_honoured():
    with ExitStack() as stack:
        c = Cluster(stack)
        _, node = c.node(serves=DAYS)
        cache = DictCache()
        policy = SegmentCache(cache, Key)
        run(runs(c.runner(cache_policy=policy), sum_query(WEEK, populateCache=False)))
        assert cache.data == {}
        run(runs(c.runner(cache_policy=policy), sum_query(WEEK), sum_query(WEEK, useCache=False)))
        assert len(node.requests) == 3


def test_realtime_segments_and_by_segment_are_never_cached():
    with ExitStack() as stack:
        c = Cluster(stack)
        fake_port_server, _ = c.node(serves=DAYS)
        c.view.add_server(DataServer(fake_port_server.name, fake_port_server.host, type="realtime"))
        cache = DictCache()
        policy = SegmentCache(cache, Key)
        assert run(runs(c.runner(cache_policy=policy), sum_query(WEEK))) == [[oracle(DAYS)]]
        assert cache.data == {}
        c.view.add_server(fake_port_server)  # historical again
        run(runs(c.runner(cache_policy=policy), sum_query(WEEK, bySegment=True)))
        assert cache.data == {}


def test_cache_key_layout_is_druids():
    seg = segment(interval="2015-09-12/2015-09-13", version="v7", part=0)
    task = SegmentTask(ServerSelector(seg), seg.descriptor)
    key = segment_cache_key(task, b"Q")
    assert key[:8] == (1442016000000).to_bytes(8, "big") and key[8:16] == (1442102400000).to_bytes(8, "big")
    assert key[16:18] == b"v7" and key[18:22] == (0).to_bytes(4, "big") and key[22:] == b"Q"


def test_partial_codec_round_trip():
    t = pa.table({"__segment": ["a", "b"], "x": [1, 2]})
    assert decode_partial(encode_partial(t)).equals(t)
