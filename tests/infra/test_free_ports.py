"""Ports for test and quickstart servers come from below the kernel's ephemeral range, so no
outgoing connection can take one between its choice and the server's bind."""

from __future__ import annotations

import socket

import pytest

from strata.cli import ports


def _first_ephemeral() -> int:
    return int(ports.EPHEMERAL_RANGE.read_text().split()[0])


def test_ports_are_below_the_ephemeral_range_distinct_and_free(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ports, "_candidates", None)
    chosen = [ports.free_port() for _ in range(50)]
    assert len(set(chosen)) == 50
    assert all(ports.LOWEST <= p < _first_ephemeral() for p in chosen), chosen
    for p in chosen[:5]:
        with socket.socket() as s:
            s.bind(("127.0.0.1", p))


def test_a_port_held_by_someone_is_passed_over(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ports, "_candidates", None)
    first = ports.free_port()
    with socket.socket() as held:
        held.bind(("127.0.0.1", first + 1))  # the next in this process's walk
        assert ports.free_port() not in (first, first + 1)


@pytest.mark.parametrize("worker", [0, 1, 2])
def test_each_xdist_worker_draws_from_its_own_slice(monkeypatch: pytest.MonkeyPatch, worker: int) -> None:
    monkeypatch.setenv("PYTEST_XDIST_WORKER", f"gw{worker}")
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "3")
    own = ports._own_slice()
    size = (_first_ephemeral() - ports.LOWEST) // 3
    assert own == range(ports.LOWEST + worker * size, ports.LOWEST + (worker + 1) * size)
    monkeypatch.setattr(ports, "_candidates", None)
    assert ports.free_port() in own


def test_ports_promised_to_servers_not_started_are_passed_over(monkeypatch: pytest.MonkeyPatch) -> None:
    """A test picks a quickstart's node ports and passes them on; the quickstart, walking its own
    sequence, must not choose one of them for its ZooKeeper before the node binds it."""
    monkeypatch.setattr(ports, "_candidates", None)
    first = ports.free_port()
    monkeypatch.setattr(ports, "_candidates", None)
    monkeypatch.setattr(ports, "_sequence", lambda: iter(range(first + 1, first + 100)))
    promised = {first + 1, first + 2, first + 3}
    chosen = ports.free_port(excluding=promised)
    assert chosen not in promised and chosen > first + 3


def test_the_kernels_choice_also_passes_over_promised_ports(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ports, "_candidates", None)
    monkeypatch.setattr(ports, "_sequence", lambda: iter(()))  # no slice below the ephemeral range
    given = iter([40_001, 40_002, 40_003])
    monkeypatch.setattr(ports, "_kernel_chosen", lambda: next(given))
    assert ports.free_port(excluding={40_001, 40_002}) == 40_003
