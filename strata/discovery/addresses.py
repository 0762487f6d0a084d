"""The address a node binds apart from the name it announces (Druid's `druid.host`).

A node in a container or behind NAT binds one address (often the wildcard) and must announce a
name the other hosts reach. Announcing a loopback or wildcard address in a ZooKeeper that lives on
another host is a misconfiguration no query would survive (brokers elsewhere would call
themselves), so it is refused before the node starts. Pure: name resolution is passed in.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Sequence
from dataclasses import dataclass

WILDCARDS = frozenset({"0.0.0.0", "::", "*", ""})
DEFAULT_BIND = "127.0.0.1"

Resolver = Callable[[str], Sequence[str]]
"""A host name -> its addresses; raises OSError when the name does not resolve."""


class AddressError(ValueError):
    """A --bind / --advertise value that cannot be used."""


@dataclass(frozen=True, slots=True)
class HostPort:
    host: str
    port: int

    def __str__(self) -> str:
        """`host:port`, an IPv6 literal in brackets: the node's announced name."""
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def split_host_port(text: str, default_port: int | None) -> HostPort:
    """`HOST`, `HOST:PORT`, `[V6]` or `[V6]:PORT`; a missing port is `default_port`."""
    text = text.strip()
    host, port_text = text, ""
    if text.startswith("["):
        end = text.find("]")
        if end < 0 or (end + 1 < len(text) and text[end + 1] != ":"):
            raise AddressError(f"bad address {text!r}: expected [IPV6] or [IPV6]:PORT")
        host, port_text = text[1:end], text[end + 2 :]
    elif text.count(":") == 1:
        host, port_text = text.split(":")
    elif text.count(":") > 1:
        host = text  # a bare IPv6 literal
    if not host:
        raise AddressError(f"bad address {text!r}: the host is empty")
    if not port_text:
        if default_port is None:
            raise AddressError(f"bad address {text!r}: expected HOST:PORT")
        return HostPort(host, default_port)
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise AddressError(f"bad port in {text!r}: expected 1-65535")
    return HostPort(host, int(port_text))


def is_wildcard(host: str) -> bool:
    return host.strip("[]") in WILDCARDS


def is_loopback(host: str) -> bool:
    """A literal loopback address or the name `localhost` (no resolution)."""
    host = host.strip("[]").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def advertised_address(bind: str, port: int, advertise: str | None, hostname: str) -> HostPort:
    """What a node announces: `--advertise` when given, else the bind address (the machine's
    `hostname` when bound to every address). `--advertise` may carry its own port (NAT, a
    container's published port)."""
    if advertise is not None and advertise.strip():
        found = split_host_port(advertise, port)
        if is_wildcard(found.host):
            raise AddressError(
                f"--advertise {advertise!r} is a wildcard: announce a name or address others reach"
            )
        return found
    return HostPort(hostname if is_wildcard(bind) else bind, port)


def zk_hosts(connect: str) -> list[str]:
    """The host names of a ZooKeeper connect string `HOST:PORT,...[/chroot]`."""
    servers = connect.strip().split("/", 1)[0]
    return [split_host_port(s, 2181).host for s in servers.split(",") if s.strip()]


def _resolves_to_loopback(host: str, resolve: Resolver) -> bool | None:
    """True/False for a name whose every address is/is not loopback; None if it does not resolve."""
    if is_loopback(host):
        return True
    try:
        ipaddress.ip_address(host)
        return False
    except ValueError:
        pass
    try:
        found = list(resolve(host))
    except OSError:
        return None
    return bool(found) and all(is_loopback(a) for a in found)


def unreachable_announcement(announced: HostPort, zk_connect: str | None, resolve: Resolver) -> str | None:
    """Why announcing `announced` in that ZooKeeper would hand other hosts an address they cannot
    reach, or None when it is fine (no ZooKeeper, a ZooKeeper on this host, a routable name)."""
    if not zk_connect:
        return None
    if not (is_loopback(announced.host) or is_wildcard(announced.host)):
        return None
    remote = [h for h in zk_hosts(zk_connect) if _resolves_to_loopback(h, resolve) is False]
    if not remote:
        return None
    kind = "wildcard" if is_wildcard(announced.host) else "loopback"
    return (
        f"refusing to announce {announced} in ZooKeeper at {', '.join(remote)}: it is a {kind} "
        "address, which the other hosts cannot reach. Pass --advertise HOST[:PORT] with a name or "
        "address they reach (and --bind 0.0.0.0 or that address), or run ZooKeeper on this host"
    )
