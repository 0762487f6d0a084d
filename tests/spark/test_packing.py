"""Packing segments into Spark partitions and a task's segments into data-node requests (pure;
end to end in test_spark_read.py)."""

from __future__ import annotations

import itertools

import pytest

from strata.spark import data_nodes
from strata.spark.data_nodes import node_requests
from strata.spark.reader import node_urls, pack


@pytest.mark.parametrize("n", [0, 1, 2, 3, 7, 24])
@pytest.mark.parametrize("parts", [1, 2, 3, 5, 30])
def test_pack_uses_every_index_once_in_order(n: int, parts: int) -> None:
    sizes = [(i * 37) % 11 for i in range(n)]  # some zero sizes too
    runs = pack(sizes, parts)
    assert len(runs) == min(n, parts)
    assert all(runs)  # no empty partition
    assert list(itertools.chain.from_iterable(runs)) == list(range(n))


def test_pack_balances_by_size() -> None:
    sizes = [100, 1, 1, 1, 1, 100, 1, 1, 1, 1]
    runs = pack(sizes, 2)
    totals = [sum(sizes[i] for i in run) for run in runs]
    assert totals == [104, 104]
    assert pack([5] * 8, 4) == [[0, 1], [2, 3], [4, 5], [6, 7]]


def test_node_urls_keep_historicals_only() -> None:
    locations = [
        {"name": "h1:8083", "host": "h1:8083", "type": "historical"},
        {"name": "r1:8100", "host": "r1:8100", "type": "realtime"},
        {"name": "b1:8083", "host": "b1:8083", "type": "bridge"},
    ]
    assert node_urls(locations) == ["http://h1:8083", "http://b1:8083"]


def seg(i: int) -> dict[str, object]:
    return {"itvl": f"2020-01-01T{i:02d}/2020-01-01T{i + 1:02d}", "ver": "v", "part": 0}


def test_one_request_per_node_and_the_unserved_to_the_broker() -> None:
    segments = [seg(i) for i in range(5)]
    servers = [["http://a"], ["http://b", "http://a"], ["http://a"], [], ["http://b"]]
    requests, unserved = node_requests(segments, servers, [10] * 5)
    assert requests == [("http://a", [seg(0), seg(2)]), ("http://b", [seg(1), seg(4)])]
    assert unserved == [seg(3)]


def test_a_request_is_split_past_its_byte_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(data_nodes, "MAX_REQUEST_BYTES", 25)
    segments = [seg(i) for i in range(4)]
    requests, _ = node_requests(segments, [["http://a"]] * 4, [10, 10, 10, 30])
    assert requests == [("http://a", [seg(0), seg(1)]), ("http://a", [seg(2)]), ("http://a", [seg(3)])]
