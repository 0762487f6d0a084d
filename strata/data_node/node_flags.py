"""Command-line flags every data node (historical, real-time) takes, and the name it announces."""

from __future__ import annotations

import argparse

from strata.discovery.addresses import AddressError
from strata.server.address_flags import add_address_flags, node_address
from strata.server.engine_flags import GiB, add_engine_flags, engine_limits
from strata.storage.deep_storage_flags import add_deep_storage_flags


def add_data_node_flags(parser: argparse.ArgumentParser, port: int) -> None:
    add_address_flags(parser, port)
    parser.add_argument(
        "--zk", help="ZooKeeper HOST:PORT,...; without it, announce via the HTTP change feed only"
    )
    parser.add_argument("--zk-base", default="/druid", help="ZooKeeper base path (default /druid)")
    add_deep_storage_flags(parser)
    parser.add_argument(
        "--metadata", default="var/metadata.db", help="SQLite file or postgresql://USER@HOST:PORT/DB"
    )
    # four queries at once, as the four query workers ran before the limits
    add_engine_flags(parser, query_memory=GiB, engine_memory=4 * GiB)


def configure_engine(args: argparse.Namespace) -> None:
    """The engine's limits for this process, from the flags (a ValueError says which is wrong);
    segments are files, so the engine keeps its file access."""
    from strata.query.duck import configure

    configure(engine_limits(args, external_access=True))


def add_announce_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--tier",
        default="_default_tier",
        help="tier this node announces (a historical loads what retention rules send there)",
    )
    parser.add_argument("--priority", type=int, default=0, help="priority announced for this node")


def advertised(args: argparse.Namespace) -> str:
    """`host:port` this node announces; raises AddressError (with the reason) when other hosts
    could not reach it through the ZooKeeper it announces in."""
    return str(node_address(args, announces_to=args.zk or None))


__all__ = ["AddressError", "add_announce_flags", "add_data_node_flags", "advertised", "configure_engine"]
