"""`strata coordinator`: the coordinator-overlord (Druid's task and data-management APIs on port 8081)."""

from __future__ import annotations

import argparse
import logging
import sys

from strata.security.settings import add_security_flags
from strata.server.address_flags import add_address_flags
from strata.server.lifecycle import add_drain_flag
from strata.storage.deep_storage_flags import add_deep_storage_flags

HELP = "Run the coordinator-overlord: Druid's task API (ingestion, kill) and data-management API"


def configure(parser: argparse.ArgumentParser) -> None:
    add_address_flags(parser, 8081)
    add_deep_storage_flags(parser)
    parser.add_argument(
        "--engine", choices=["local", "spark", "auto"], default="local",
        help="what runs ingestion tasks: the local engine, Spark (--spark-master), or auto by input size",
    )  # fmt: skip
    parser.add_argument("--spark-master", help="Spark master URL for --engine spark (default local[*])")
    parser.add_argument(
        "--spark-conf", action="append", default=[], metavar="KEY=VALUE", help="Spark setting (repeatable)"
    )
    parser.add_argument("--task-slots", type=int, default=2, help="tasks run at once (default 2)")
    parser.add_argument(
        "--task-restarts", type=int, default=2,
        help="times a task the coordinator was restarted under is started again before it fails (default 2)",
    )  # fmt: skip
    parser.add_argument("--task-log-dir", default="var/task-logs", help="where each task's log is kept")
    parser.add_argument(
        "--period", type=float, default=60.0,
        help="seconds between runs of the retention-rule duty (Druid's druid.coordinator.period, default 60)",
    )  # fmt: skip
    parser.add_argument(
        "--indexing-period", type=float, default=1800.0,
        help="seconds between auto-compaction runs (Druid's druid.coordinator.period.indexingPeriod, "
             "default 1800)",
    )  # fmt: skip
    parser.add_argument("--zk", default=None, help="ZooKeeper HOST:PORT,...: announced there for brokers")
    parser.add_argument("--zk-base", default="/druid", help="ZooKeeper base path (default /druid)")
    add_drain_flag(parser)
    add_security_flags(parser)
    parser.add_argument(
        "--metadata", default="var/metadata.db",
        help="metadata store (tasks, locks, segments): a SQLite file or postgresql://USER@HOST:PORT/DB",
    )  # fmt: skip


def run(args: argparse.Namespace) -> int:
    from strata.coordinator.app import create_app
    from strata.coordinator.service import Coordinator, CoordinatorSettings, LeadTaken
    from strata.coordinator.task_processes import RunnerSettings
    from strata.discovery.addresses import AddressError
    from strata.ingestion.cli import spark_conf
    from strata.security.guard import SecurityStartError, start_security
    from strata.server.address_flags import node_address
    from strata.server.lifecycle import serve
    from strata.storage import MetadataStoreError, open_metadata_store
    from strata.storage.deep_storage import DeepStorageError
    from strata.storage.deep_storage_flags import deep_storage_from_args

    log = logging.getLogger("strata.coordinator")
    try:
        if args.task_slots < 1 or args.task_restarts < 0:
            raise ValueError("--task-slots must be at least 1 and --task-restarts at least 0")
        if args.period <= 0 or args.indexing_period <= 0:
            raise ValueError("--period and --indexing-period must be positive")
        spark_conf(args.spark_conf)  # a malformed KEY=VALUE fails here, not in every task
        address = node_address(args, announces_to=args.zk)
        deep_storage_from_args(args)
        settings, guard = start_security(args, "coordinator")
    except (ValueError, AddressError, DeepStorageError, SecurityStartError) as e:
        print(f"strata coordinator: error: {e}", file=sys.stderr)
        return 2
    runner = RunnerSettings(
        metadata=args.metadata, deep_storage=args.deep_storage, s3_endpoint=args.s3_endpoint,
        s3_region=args.s3_region, engine=args.engine, spark_master=args.spark_master,
        spark_conf=tuple(args.spark_conf), task_slots=args.task_slots, task_restarts=args.task_restarts,
    )  # fmt: skip
    coordinator_settings = CoordinatorSettings(
        host=address.host, port=address.port, runner=runner, task_log_dir=args.task_log_dir,
        zk=args.zk, zk_base=args.zk_base, period_s=args.period, indexing_period_s=args.indexing_period,
    )  # fmt: skip
    try:
        coordinator = Coordinator(coordinator_settings, open_metadata_store(args.metadata))
        coordinator.claim_lead()
    except (MetadataStoreError, LeadTaken) as e:
        print(f"strata coordinator: error: {e}", file=sys.stderr)
        return 1
    log.info("coordinator-overlord on http://%s:%d (%s engine, %d task slots)",
             args.bind, args.port, args.engine, args.task_slots)  # fmt: skip
    app = create_app(coordinator, guard)
    return serve(app, args.bind, args.port, drain_s=args.drain_seconds, tls=settings.tls)
