"""`strata realtime`: take pushed events, answer queries over them at once, hand segments off."""

from __future__ import annotations

import argparse
import sys

from strata.data_node.node_flags import add_announce_flags, add_data_node_flags, advertised, configure_engine
from strata.security.settings import add_security_flags
from strata.server.lifecycle import add_drain_flag
from strata.server.lookup_sync import add_lookup_flags

HELP = "Run a real-time node: push ingestion, queries over live segments, handoff to historicals"


def configure(parser: argparse.ArgumentParser) -> None:
    add_data_node_flags(parser, 8100)
    parser.add_argument(
        "--base-dir", default="var/realtime", help="write-ahead log and intermediate persists"
    )
    parser.add_argument(
        "--spec", help="JSON file: Druid dataSchema (+ tuningConfig), bare or in an ingestion spec"
    )
    add_announce_flags(parser)
    parser.add_argument(
        "--drop-delay",
        type=float,
        default=30.0,
        help="seconds a handed-off segment stays readable for queries already running",
    )
    add_drain_flag(parser)
    add_lookup_flags(parser, coordinator_flag=True)
    add_security_flags(parser)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from strata.discovery import ZkPaths
    from strata.ingestion.errors import SpecError
    from strata.realtime.app import RealtimeConfig, create_app, leave_cluster
    from strata.realtime.spec import load_realtime_spec
    from strata.security.client import internal_headers
    from strata.security.guard import SecurityStartError, start_security
    from strata.security.http import secure_data_node
    from strata.server.lifecycle import serve
    from strata.server.lookup_sync import attach_lookups, sync_from_args
    from strata.storage.deep_storage import DeepStorageError
    from strata.storage.deep_storage_flags import deep_storage_from_args

    if not args.spec:
        print("strata realtime: error: --spec SPEC.json is required", file=sys.stderr)
        return 2
    if not 0 < args.port < 65536:
        print("strata realtime: error: a valid --port is required", file=sys.stderr)
        return 2
    try:
        spec = load_realtime_spec(args.spec)
        zk_base = ZkPaths(args.zk_base).base
        name = advertised(args)  # refuses an address other hosts cannot reach
        deep_storage_from_args(args)  # a deep storage URL it cannot use fails here, not at start-up
        configure_engine(args)
    except (SpecError, ValueError, DeepStorageError) as e:
        print(f"strata realtime: error: {e}", file=sys.stderr)
        return 2
    try:
        settings, guard = start_security(
            args, "realtime"
        )  # the internal identity only, with an authenticator
    except SecurityStartError as e:
        print(f"strata realtime: error: {e}", file=sys.stderr)
        return 2
    config = RealtimeConfig(
        name=name,
        spec=spec,
        base_dir=Path(args.base_dir),
        deep_storage=args.deep_storage,
        s3_endpoint=args.s3_endpoint,
        s3_region=args.s3_region,
        metadata=args.metadata,
        zk=args.zk or None,
        zk_base=zk_base,
        tier=args.tier,
        priority=args.priority,
        drop_delay_s=args.drop_delay,
    )
    app = create_app(config)
    coordinator = args.coordinator
    attach_lookups(
        app, sync_from_args(args, name, lambda: coordinator, internal_headers(settings), settings.tls_ca)
    )
    secure_data_node(app, guard, name)
    state = app.state.realtime
    return serve(
        app,
        args.bind,
        args.port,
        drain_s=args.drain_seconds,
        log_level=args.log_level,
        on_stop=lambda: leave_cluster(state),
        tls=settings.tls,
    )
