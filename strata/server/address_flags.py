"""`--bind` and `--advertise`, the two addresses of every server (broker, historical, real-time).

`--bind` is what the HTTP server listens on; `--advertise` is the name the node gives others
(announced in ZooKeeper and the change feed, written as `host` in error bodies). They differ in a
container or behind NAT. `--host` is the old name of `--bind` and still works.
"""

from __future__ import annotations

import argparse
import socket
from collections.abc import Sequence

from strata.discovery.addresses import (
    DEFAULT_BIND,
    AddressError,
    HostPort,
    advertised_address,
    unreachable_announcement,
)


def add_address_flags(parser: argparse.ArgumentParser, port: int) -> None:
    parser.add_argument("--port", type=int, default=port, help=f"HTTP port (default {port})")
    parser.add_argument(
        "--bind",
        "--host",
        dest="bind",
        default=DEFAULT_BIND,
        help=f"address to listen on (default {DEFAULT_BIND}; 0.0.0.0 for every address)",
    )
    parser.add_argument(
        "--advertise",
        default=None,
        metavar="HOST[:PORT]",
        help="name others reach this node at, announced in ZooKeeper (default: the --bind address, "
        "or this machine's host name when bound to every address)",
    )


def _resolve(host: str) -> Sequence[str]:
    return [str(info[4][0]) for info in socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)]


def node_address(args: argparse.Namespace, *, announces_to: str | None = None) -> HostPort:
    """The advertised address from parsed flags; raises AddressError when it is unusable, or
    when a node announcing in the ZooKeeper `announces_to` would announce an unreachable one."""
    address = advertised_address(args.bind, args.port, args.advertise, socket.gethostname())
    problem = unreachable_announcement(address, announces_to, _resolve)
    if problem is not None:
        raise AddressError(problem)
    return address
