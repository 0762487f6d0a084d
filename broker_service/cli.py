"""`strata broker`: the query broker (Druid's native API on port 8082)."""

from __future__ import annotations

import argparse

from server_common.lifecycle import add_drain_flag

HELP = "Run a query broker: routes Druid native queries to the data nodes and merges their answers."


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--port", type=int, default=8082, help="HTTP port (default 8082)")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--zk", default=None, help="ZooKeeper HOST:PORT,... (discovery zk)")
    parser.add_argument("--zk-base", default="/druid", help="ZooKeeper base path (default /druid)")
    parser.add_argument(
        "--discovery",
        choices=["zk", "http"],
        default=None,
        help="where segment announcements come from (default: zk when --zk is set, else http)",
    )
    parser.add_argument(
        "--nodes", default=None, help="data nodes HOST:PORT[/TYPE],... to follow (discovery http)"
    )
    parser.add_argument("--cache", choices=["none", "lru", "memcached", "hybrid"], default="none")
    parser.add_argument("--cache-size", type=int, default=256 * 1024 * 1024, help="LRU cache bytes")
    parser.add_argument("--memcached", default=None, help="memcached HOST:PORT,...")
    parser.add_argument(
        "--result-cache",
        choices=["on", "off"],
        default="on",
        help="with --cache: also keep whole answers, valid while the query reads the same segments",
    )
    parser.add_argument("--max-concurrent-queries", type=int, default=32)
    parser.add_argument("--query-queue", type=int, default=64, help="queries waiting beyond the running ones")
    parser.add_argument(
        "--lost-segment-grace",
        type=float,
        default=300.0,
        help="seconds a segment whose every server vanished is still reported missing (0: forget at once)",
    )
    parser.add_argument("--merge-threads", type=int, default=4, help="worker threads merging partials")
    add_drain_flag(parser)


def run(args: argparse.Namespace) -> int:
    import logging

    from broker_service.app import create_app
    from broker_service.build import build_broker
    from broker_service.errors import BrokerConfigError
    from server_common.lifecycle import serve

    log = logging.getLogger("strata.broker")
    try:
        broker = build_broker(args)
    except BrokerConfigError as e:
        log.error("%s", e)
        return 2
    app = create_app(broker)
    log.info("broker listening on http://%s:%d (%s discovery)", args.host, args.port, broker_kind(broker))
    return serve(app, args.host, args.port, drain_s=args.drain_seconds)


def broker_kind(broker: object) -> str:
    inventory = getattr(broker, "inventory", None)
    return inventory.status().kind if inventory is not None else "no"
