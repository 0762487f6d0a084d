"""`strata historical`: load assigned segments, announce them, answer queries over them."""

from __future__ import annotations

import argparse
import sys

from strata.data_node.node_flags import add_announce_flags, add_data_node_flags, advertised, configure_engine
from strata.security.settings import add_security_flags
from strata.server.lifecycle import add_drain_flag
from strata.server.lookup_sync import add_lookup_flags

HELP = "Run a historical node: load segments from deep storage, announce them, serve queries"


def configure(parser: argparse.ArgumentParser) -> None:
    add_data_node_flags(parser, 8083)
    parser.add_argument("--segment-cache", default="var/segment-cache", help="local segment cache directory")
    parser.add_argument("--segment-cache-format", choices=["arrow", "parquet"], default="arrow",
                        help="what queries read: an uncompressed, memory-mapped Arrow copy of each cached "
                             "segment (faster, more disk) or its Parquet file")  # fmt: skip
    add_announce_flags(parser)
    parser.add_argument("--max-size", type=int, default=0, help="announced capacity in bytes")
    parser.add_argument(
        "--replicas",
        type=int,
        default=2,
        help="copies of each segment in _default_tier while no default retention rule is set",
    )
    parser.add_argument(
        "--server-type",
        choices=["historical", "realtime"],
        default="historical",
        help=argparse.SUPPRESS,  # tests only: stands in for a real-time node until `strata realtime` exists
    )
    parser.add_argument("--poll-period", type=float, default=5.0, help="seconds between metadata polls")
    parser.add_argument("--drop-delay", type=float, default=30.0,
                        help="seconds a dropped segment's files outlive queries reading them")  # fmt: skip
    add_drain_flag(parser)
    add_lookup_flags(parser, coordinator_flag=True)
    add_security_flags(parser)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from historical_service.app import HistoricalConfig, create_app, leave_cluster
    from strata.discovery import ServerType, ZkPaths
    from strata.security.client import internal_headers
    from strata.security.guard import SecurityStartError, start_security
    from strata.security.http import secure_data_node
    from strata.server.lifecycle import serve
    from strata.server.lookup_sync import attach_lookups, sync_from_args
    from strata.storage.deep_storage import DeepStorageError
    from strata.storage.deep_storage_flags import deep_storage_from_args

    if args.replicas < 1 or args.poll_period <= 0 or not 0 < args.port < 65536:
        print("strata historical: error: --replicas >= 1, --poll-period > 0 and a valid --port are required",
              file=sys.stderr)  # fmt: skip
        return 2
    try:
        zk_base = ZkPaths(args.zk_base).base
        name = advertised(args)  # refuses an address other hosts cannot reach
        deep_storage_from_args(args)  # a deep storage URL it cannot use fails here, not at start-up
        configure_engine(args)
    except (ValueError, DeepStorageError) as e:
        print(f"strata historical: error: {e}", file=sys.stderr)
        return 2
    try:
        settings, guard = start_security(
            args, "historical"
        )  # the internal identity only, with an authenticator
    except SecurityStartError as e:
        print(f"strata historical: error: {e}", file=sys.stderr)
        return 2
    config = HistoricalConfig(
        name=name,
        deep_storage=args.deep_storage,
        s3_endpoint=args.s3_endpoint,
        s3_region=args.s3_region,
        metadata=args.metadata,
        segment_cache=Path(args.segment_cache),
        zk=args.zk or None,
        zk_base=zk_base,
        tier=args.tier,
        priority=args.priority,
        max_size=args.max_size,
        replicas=args.replicas,
        poll_period_s=args.poll_period,
        drop_delay_s=args.drop_delay,
        server_type=ServerType(args.server_type),
        segment_cache_format=args.segment_cache_format,
    )
    app = create_app(config)
    coordinator = args.coordinator
    attach_lookups(
        app, sync_from_args(args, name, lambda: coordinator, internal_headers(settings), settings.tls_ca)
    )
    secure_data_node(app, guard, name)
    # SIGTERM/SIGINT: leave ZooKeeper first (brokers stop sending queries), then drain and exit
    state = app.state.historical
    return serve(app, args.bind, args.port, drain_s=args.drain_seconds, log_level=args.log_level,
                 on_stop=lambda: leave_cluster(state), tls=settings.tls)  # fmt: skip
