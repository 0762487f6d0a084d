"""--bind apart from --advertise: parsing, the announced name, and the refusal of an address other
hosts cannot reach (a fake resolver; no name is looked up)."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence

import pytest

from strata.discovery.addresses import (
    AddressError,
    HostPort,
    advertised_address,
    is_loopback,
    split_host_port,
    unreachable_announcement,
    zk_hosts,
)
from strata.server.address_flags import add_address_flags


def _resolve(table: dict[str, list[str]]) -> Callable[[str], Sequence[str]]:
    def resolve(host: str) -> Sequence[str]:
        if host not in table:
            raise OSError(f"no such name {host}")
        return table[host]

    return resolve


NAMES = _resolve({"zk1": ["10.0.0.5"], "me": ["127.0.1.1"], "both": ["127.0.0.1", "10.0.0.9"]})


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("node1", HostPort("node1", 8083)),
        ("node1:9000", HostPort("node1", 9000)),
        ("10.1.2.3", HostPort("10.1.2.3", 8083)),
        ("[fd00::1]:9000", HostPort("fd00::1", 9000)),
        ("[fd00::1]", HostPort("fd00::1", 8083)),
        ("fd00::1", HostPort("fd00::1", 8083)),
    ],
)
def test_split_host_port(text: str, want: HostPort) -> None:
    assert split_host_port(text, 8083) == want


@pytest.mark.parametrize("text", ["", ":80", "node:0", "node:65536", "node:x", "[fd00::1", "[::1]x"])
def test_split_host_port_rejects(text: str) -> None:
    with pytest.raises(AddressError):
        split_host_port(text, 8083)


def test_ipv6_names_are_bracketed() -> None:
    assert str(HostPort("fd00::1", 8083)) == "[fd00::1]:8083" and str(HostPort("h", 1)) == "h:1"


def test_advertised_defaults_to_bind_and_hostname_for_wildcards() -> None:
    assert advertised_address("127.0.0.1", 8083, None, "box") == HostPort("127.0.0.1", 8083)
    assert advertised_address("0.0.0.0", 8083, None, "box") == HostPort("box", 8083)
    assert advertised_address("::", 8083, "", "box") == HostPort("box", 8083)


def test_advertise_overrides_host_and_optionally_port() -> None:
    assert advertised_address("0.0.0.0", 8083, "hist-1.example", "box") == HostPort("hist-1.example", 8083)
    assert advertised_address("0.0.0.0", 8083, "203.0.113.7:30083", "box") == HostPort("203.0.113.7", 30083)
    with pytest.raises(AddressError, match="wildcard"):
        advertised_address("0.0.0.0", 8083, "0.0.0.0", "box")


def test_loopback_names() -> None:
    assert all(is_loopback(h) for h in ("127.0.0.1", "127.8.9.1", "::1", "[::1]", "localhost", "a.localhost"))
    assert not any(is_loopback(h) for h in ("10.0.0.1", "zk1", "0.0.0.0", "localhostx"))


def test_zk_hosts_drop_ports_and_chroot() -> None:
    assert zk_hosts("zk1:2181,10.0.0.2:2181,[fd00::3]:2181/strata/x") == ["zk1", "10.0.0.2", "fd00::3"]
    assert zk_hosts("zk1") == ["zk1"]


@pytest.mark.parametrize("announced", ["127.0.0.1", "localhost", "::1", "0.0.0.0"])
def test_loopback_or_wildcard_announced_to_a_remote_zookeeper_is_refused(announced: str) -> None:
    why = unreachable_announcement(HostPort(announced, 8083), "127.0.0.1:2181,zk1:2181/druid", NAMES)
    assert why is not None
    assert "refusing to announce" in why and "zk1" in why and "--advertise" in why
    assert "127.0.0.1:2181" not in why  # only the remote servers are named


@pytest.mark.parametrize(
    ("announced", "zk"),
    [
        ("127.0.0.1", None),  # no ZooKeeper: the HTTP change feed only
        ("127.0.0.1", "127.0.0.1:2181"),  # everything on one machine, the default
        ("127.0.0.1", "localhost:2181,[::1]:2182"),
        ("127.0.0.1", "me:2181"),  # this machine's own name (Debian maps it to 127.0.1.1)
        ("127.0.0.1", "unknown-name:2181"),  # cannot tell; ZooKeeper's connect will say more
        ("10.0.0.7", "zk1:2181"),  # a routable address
        ("hist-1", "zk1:2181"),
    ],
)
def test_reachable_or_undecidable_announcements_are_allowed(announced: str, zk: str | None) -> None:
    assert unreachable_announcement(HostPort(announced, 8083), zk, NAMES) is None


def test_a_name_resolving_partly_off_loopback_is_remote() -> None:
    assert unreachable_announcement(HostPort("127.0.0.1", 1), "both:2181", NAMES) is not None


def test_flags_default_and_old_host_spelling() -> None:
    parser = argparse.ArgumentParser()
    add_address_flags(parser, 8083)
    args = parser.parse_args([])
    assert (args.bind, args.port, args.advertise) == ("127.0.0.1", 8083, None)
    args = parser.parse_args(["--host", "0.0.0.0", "--advertise", "h1:9"])
    assert (args.bind, args.advertise) == ("0.0.0.0", "h1:9")
