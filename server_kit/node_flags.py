"""Command-line flags every data node (historical, real-time) takes, and the name it announces."""

from __future__ import annotations

import argparse


def add_data_node_flags(parser: argparse.ArgumentParser, port: int) -> None:
    parser.add_argument("--port", type=int, default=port, help=f"HTTP port (default {port})")
    parser.add_argument(
        "--host", default="127.0.0.1", help="address to bind and announce (default 127.0.0.1)"
    )
    parser.add_argument(
        "--zk", help="ZooKeeper HOST:PORT,...; without it, announce via the HTTP change feed only"
    )
    parser.add_argument("--zk-base", default="/druid", help="ZooKeeper base path (default /druid)")
    parser.add_argument("--deep-storage", default="var/deep-storage", help="deep storage directory")
    parser.add_argument("--metadata", default="var/metadata.db", help="metadata store (SQLite file)")


def add_announce_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tier", default="_default_tier", help="tier announced for this node")
    parser.add_argument("--priority", type=int, default=0, help="priority announced for this node")


def advertised(host: str, port: int) -> str:
    """`host:port` others reach this node at (the machine's name when bound to every address)."""
    if host in ("0.0.0.0", "::", ""):
        import socket

        host = socket.gethostname()
    return f"{host}:{port}"
