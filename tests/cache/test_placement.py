from collections import Counter

import pytest

from cache.placement import RendezvousPlacement

NODES = ["10.0.0.1:11211", "10.0.0.2:11211", "10.0.0.3:11211"]
KEYS = [f"strata:{i:040x}:{i * 7919:040x}" for i in range(3000)]


def test_server_order_does_not_matter():
    a, b = RendezvousPlacement(NODES), RendezvousPlacement(list(reversed(NODES)))
    assert all(a.node_for(k) == b.node_for(k) for k in KEYS)


def test_keys_spread_roughly_evenly():
    counts = Counter(RendezvousPlacement(NODES).node_for(k) for k in KEYS)
    assert set(counts) == set(NODES)
    assert all(800 < c < 1200 for c in counts.values())  # 1000 expected each; binomial sd ~26


def test_removing_a_server_moves_only_its_keys():
    full, reduced = RendezvousPlacement(NODES), RendezvousPlacement(NODES[:2])
    for k in KEYS:
        before = full.node_for(k)
        if before != NODES[2]:
            assert reduced.node_for(k) == before


def test_single_node_and_empty():
    assert RendezvousPlacement(["only:1"]).node_for("anything") == "only:1"
    with pytest.raises(ValueError):
        RendezvousPlacement([])
