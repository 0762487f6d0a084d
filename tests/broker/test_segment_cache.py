"""The per-segment cache policy in the query path (in-memory bulk cache; fake data nodes)."""

from __future__ import annotations

import asyncio
from contextlib import ExitStack
from dataclasses import dataclass

import pyarrow as pa

from broker_service.cached_partials import decode_partial, encode_partial
from broker_service.segment_cache import SegmentCache, segment_cache_key
from broker_service.segment_plan import SegmentTask
from broker_service.server_view import ServerSelector
from strata.discovery.server_metadata import ServerMetadata, ServerType
from tests.broker.helpers import run, segment, sum_query
from tests.broker.test_query_runner import DAYS, VALUES, WEEK, Cluster, oracle


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
        c.view.add_server(
            ServerMetadata(fake_port_server.name, fake_port_server.host, type=ServerType.REALTIME)
        )
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


def test_partial_codec_round_trip_small_plain_large_compressed():
    t = pa.table({"__segment": ["a", "b"], "x": [1, 2]})
    assert decode_partial(encode_partial(t)).equals(t)
    big = pa.table({"__segment": ["s"] * 50_000, "x": list(range(50_000))})
    payload = encode_partial(big)
    assert decode_partial(payload).equals(big)
    assert len(payload) < big.nbytes / 2  # compressed: repeated strings, small ints


async def burst(runner, queries):
    return [r.results for r in await asyncio.gather(*(runner.run(q) for q in queries))]


def test_a_burst_of_identical_cold_queries_fetches_each_segment_once():
    with ExitStack() as stack:
        c = Cluster(stack)
        _, node = c.node(serves=DAYS)
        node.delay_s = 0.3  # the first query's fetch is still running when the others arrive
        cache = DictCache()
        policy = SegmentCache(cache, Key)
        runner = c.runner(cache_policy=policy)
        answers = run(burst(runner, [sum_query(WEEK, queryId=f"q{i}") for i in range(50)]))
        assert answers == [[oracle(DAYS)]] * 50
        assert len(node.requests) == 1  # one request naming every segment, for all fifty queries
        assert policy.stats["shared"] == 49 * len(DAYS)
        assert policy.flights == 0


class SlowReadCache(DictCache):
    """A cache whose reads take `read_s`: a read sent before a store can answer after it."""

    read_s = 0.0

    async def aget_many(self, keys):
        found = await super().aget_many(keys)  # what the cache held when the read was sent
        await asyncio.sleep(self.read_s)
        return found


def test_a_cache_read_outlived_by_the_fetch_it_missed_still_shares_it():
    """B's cache read leaves while A fetches and returns after A stored its partials: B must take
    A's partials, not fetch the segments a second time."""
    with ExitStack() as stack:
        c = Cluster(stack)
        _, node = c.node(serves=DAYS)
        node.delay_s = 0.1
        cache = SlowReadCache()
        policy = SegmentCache(cache, Key)
        runner = c.runner(cache_policy=policy)

        async def scenario():
            a = asyncio.create_task(runner.run(sum_query(WEEK, queryId="a")))
            await asyncio.sleep(0.05)  # A leads: its read is done, its fetch running
            cache.read_s = 0.4  # B's read outlives A's fetch and store
            b = await runner.run(sum_query(WEEK, queryId="b"))
            return (await a).results, b.results

        a, b = run(scenario())
        assert a == b == [oracle(DAYS)]
        assert len(node.requests) == 1
        assert policy.flights == 0


def test_queries_overlapping_in_both_directions_share_without_deadlock():
    """A leads day 1-3 and waits for 4-7; B leads 4-7 and waits for 1-3 (complete before waiting)."""
    with ExitStack() as stack:
        c = Cluster(stack)
        _, node = c.node(serves=DAYS)
        node.delay_s = 0.3
        policy = SegmentCache(DictCache(), Key)
        runner = c.runner(cache_policy=policy)
        first_half, second_half = "2015-09-01/2015-09-04", "2015-09-04/2015-09-07"

        async def scenario():
            a = asyncio.create_task(runner.run(sum_query(first_half, queryId="a", timeout=20000)))
            b = asyncio.create_task(runner.run(sum_query(second_half, queryId="b", timeout=20000)))
            await asyncio.sleep(0.05)  # both lead their half; now the whole week waits on both
            whole = await runner.run(sum_query(WEEK, queryId="w", timeout=20000))
            return (await a).results, (await b).results, whole.results

        a, b, whole = run(scenario())
        assert a == [oracle(DAYS[:3])] and b == [oracle(DAYS[3:])] and whole == [oracle(DAYS)]
        assert len(node.requests) == 2 and policy.stats["shared"] == len(DAYS)


def test_waiters_fetch_for_themselves_when_the_leading_query_fails():
    with ExitStack() as stack:
        c = Cluster(stack)
        _, node = c.node(serves=DAYS)
        node.delay_s = 0.3
        policy = SegmentCache(DictCache(), Key)
        runner = c.runner(cache_policy=policy)

        async def scenario():
            leader = asyncio.create_task(runner.run(sum_query(WEEK, queryId="leader")))
            await asyncio.sleep(0.05)
            follower = asyncio.create_task(runner.run(sum_query(WEEK, queryId="follower")))
            await asyncio.sleep(0.05)
            leader.cancel()  # e.g. the user went away
            node.delay_s = 0
            return (await follower).results, leader

        follower, leader = run(scenario())
        assert leader.cancelled()
        assert follower == [oracle(DAYS)]
        assert len(node.requests) == 2 and policy.flights == 0


def test_nodes_may_merge_only_what_the_broker_does_not_cache():
    with ExitStack() as stack:
        c = Cluster(stack)
        _, node = c.node(serves=DAYS)
        policy = SegmentCache(DictCache(), Key)
        cached, plain = c.runner(cache_policy=policy), c.runner()
        run(runs(cached, sum_query(WEEK), sum_query(WEEK, useCache=False, populateCache=False)))
        run(runs(plain, sum_query(WEEK)))
        flags = [r["context"].get("perSegmentPartials", True) for r in node.requests]
        assert flags == [True, False, False]  # populating / not caching / no cache at all


class CountingKey:
    """A cache key that counts field-by-field comparisons (made when a dict finds an equal key
    that is not the very same object)."""

    compared = 0

    def __init__(self, namespace: str, key: bytes):
        self.namespace, self.key = namespace, key

    def __hash__(self) -> int:
        return hash((self.namespace, self.key))

    def __eq__(self, other: object) -> bool:
        CountingKey.compared += 1
        return isinstance(other, CountingKey) and (self.namespace, self.key) == (other.namespace, other.key)


def test_repeats_find_the_stored_keys_by_identity_and_reread_changed_values():
    victim_id = DAYS[2].id
    rows, total = VALUES[victim_id]
    want = oracle(DAYS)
    changed = [{"rows": want["rows"] - rows + 1000, "total": want["total"] - total + 5}]

    async def scenario(runner, policy, cache):
        (first,) = await runs(runner, sum_query(WEEK))
        CountingKey.compared = 0
        assert await runs(runner, sum_query(WEEK), sum_query(WEEK)) == [first, first]
        assert CountingKey.compared == 0  # stored under the looked-up key objects
        assert policy.stats["hits"] == 2 * len(DAYS)
        # a cached value replaced (equal key, new bytes): the next repeat reads the new partial
        victim = next(k for k in cache.data if k.namespace == victim_id)
        cache.data[victim] = encode_partial(
            pa.table({"__segment": [victim_id], "rows": [1000], "total": [5]})
        )
        assert await runs(runner, sum_query(WEEK)) == [changed]
        del cache.data[victim]  # an entry gone: that segment is fetched again, the rest still hit
        assert await runs(runner, sum_query(WEEK)) == [[want]]
        return first

    with ExitStack() as stack:
        c = Cluster(stack)
        _, node = c.node(serves=DAYS)
        cache = DictCache()
        policy = SegmentCache(cache, CountingKey)
        assert run(scenario(c.runner(cache_policy=policy), policy, cache)) == [want]
        assert len(node.requests) == 2
