"""`strata broker`: the query broker (Druid's native API on port 8082)."""

from __future__ import annotations

import argparse
import logging
import sys

from strata.security.settings import add_security_flags
from strata.server.address_flags import add_address_flags
from strata.server.engine_flags import GiB, MiB, add_engine_flags, size
from strata.server.lifecycle import add_drain_flag
from strata.server.lookup_sync import add_lookup_flags

HELP = "Run a query broker: routes Druid native queries to the data nodes and merges their answers."


def configure(parser: argparse.ArgumentParser) -> None:
    add_address_flags(parser, 8082)
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
    parser.add_argument(
        "--coordinator", default=None, metavar="HOST:PORT",
        help="the coordinator-overlord whose task and data-management APIs the broker relays "
        "(default: found in ZooKeeper with --zk)",
    )  # fmt: skip
    parser.add_argument("--cache", choices=["none", "lru", "memcached", "hybrid"], default="none")
    parser.add_argument("--cache-size", type=int, default=256 * 1024 * 1024, help="LRU cache bytes")
    parser.add_argument("--memcached", default=None, help="memcached HOST:PORT,...")
    parser.add_argument(
        "--result-cache",
        choices=["on", "off"],
        default="on",
        help="with --cache: also keep whole answers, valid while the query reads the same segments",
    )
    parser.add_argument(
        "--max-concurrent-queries",
        type=int,
        default=32,
        help="queries running at once, lanes included (Druid's druid.query.scheduler.numThreads)",
    )
    parser.add_argument(
        "--query-queue",
        type=int,
        default=64,
        help="queries waiting beyond the running ones, the highest context priority served first; "
        "past it a query is refused with 429",
    )
    parser.add_argument(
        "--laning",
        choices=["none", "hilo", "manual"],
        default="none",
        help="query laning (druid.query.scheduler.laning.strategy): hilo caps queries of negative "
        "priority in lane 'low'; manual caps the lanes named by --lane, chosen by the context's lane",
    )
    parser.add_argument(
        "--laning-max-low-percent",
        type=int,
        default=None,
        help="with --laning hilo: the percent of --max-concurrent-queries lane 'low' may use, "
        "rounded up (druid.query.scheduler.laning.maxLowPercent)",
    )
    parser.add_argument(
        "--lane",
        action="append",
        default=[],
        metavar="NAME=LIMIT",
        help="with --laning manual, repeatable: lane NAME runs at most LIMIT queries at once "
        "(druid.query.scheduler.laning.lanes.NAME)",
    )
    parser.add_argument(
        "--lane-limits-percent",
        action="store_true",
        help="with --laning manual: --lane limits are percents of --max-concurrent-queries "
        "(druid.query.scheduler.laning.isLimitPercent)",
    )
    parser.add_argument(
        "--lost-segment-grace",
        type=float,
        default=300.0,
        help="seconds a segment whose every server vanished is still reported missing (0: forget at once)",
    )
    parser.add_argument("--merge-threads", type=int, default=4, help="worker threads merging partials")
    limits = parser.add_argument_group("query limits")
    limits.add_argument(
        "--default-query-timeout", type=int, default=300_000, metavar="MS",
        help="a query's timeout when its context sets none (Druid's druid.server.http.defaultQueryTimeout; "
        "default 300000; 0: none)",
    )  # fmt: skip
    limits.add_argument(
        "--max-query-timeout", type=int, default=0, metavar="MS",
        help="the most a query's context `timeout` may ask (Druid's druid.server.http.maxQueryTimeout): more "
        "is a 400, none (0) is this, and so is a larger --default-query-timeout (default 0: no maximum)",
    )  # fmt: skip
    limits.add_argument(
        "--max-subquery-rows", type=int, default=100_000, metavar="N",
        help="rows a SQL statement's subqueries may hand the broker in all, when its context's "
        "maxSubqueryRows says nothing (Druid's druid.server.http.maxSubqueryRows; default 100000)",
    )  # fmt: skip
    limits.add_argument(
        "--max-subquery-bytes", type=size, default=None, metavar="SIZE",
        help="bytes a SQL statement's subqueries may hand the broker in all; a context's "
        "maxSubqueryBytes may lower it, never raise it (default: a quarter of --query-memory)",
    )  # fmt: skip
    limits.add_argument(
        "--max-scatter-gather-bytes", type=size, default=0, metavar="SIZE",
        help="bytes of partials one query may gather from data nodes, counted as they arrive (Druid's "
        "druid.server.http.maxScatterGatherBytes); a context's maxScatterGatherBytes may lower it, never "
        "raise it (default 0: none, as in Druid)",
    )  # fmt: skip
    add_engine_flags(parser, query_memory=512 * MiB, engine_memory=2 * GiB)
    parser.add_argument(
        "--merge-processes",
        type=int,
        default=1,
        help="worker processes merging large answers (50,000 partial rows and more) off the broker's "
        "interpreter, so a heavy groupBy does not slow other queries; 0 merges them in threads",
    )
    parser.add_argument(
        "--merge-process-rows",
        type=int,
        default=50_000,
        help="with --merge-processes: the partial rows from which a merge goes to a worker process",
    )
    parser.add_argument(
        "--release-memory-seconds",
        type=float,
        default=10.0,
        metavar="S",
        help="every S seconds, once the broker grew by 64 MiB since it last did, hand the memory its "
        "allocators (glibc's, DuckDB's) hold free back to the system, so its resident size follows "
        "what it holds rather than its high-water mark (default 10; 0: never)",
    )
    parser.add_argument(
        "--switch-interval-ms",
        type=_switch_interval_ms,
        default=1.0,
        metavar="MS",
        help="how long a thread busy with Python (a merge, a large answer made into rows) may hold the "
        "interpreter while the event loop waits for it (sys.setswitchinterval; default 1, Python's own 5)",
    )
    parser.add_argument(
        "--low-priority-nice",
        type=int,
        choices=range(20),
        default=10,
        metavar="N",
        help="the nice value of the threads, apart from the others, running a low-priority query's "
        "Python work in the broker (its partials decoded, its SQL planned, its rows made and encoded; "
        "default 10; 0: the usual priority - a raised one lets the kernel take such a thread off a "
        "core the host's other work keeps busy while it holds the interpreter lock, and the event "
        "loop waits for it)",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=1,
        help="broker processes sharing the port (SO_REUSEPORT), each with its own discovery and cache; "
        "use a shared memcached (--cache memcached/hybrid) so they share cached partials",
    )
    parser.add_argument("--reuse-port", action="store_true", help=argparse.SUPPRESS)  # set for each worker
    add_drain_flag(parser)
    add_lookup_flags(parser, coordinator_flag=False)
    add_security_flags(parser, metadata=True)


def run(args: argparse.Namespace) -> int:
    from broker_service.app import create_app
    from broker_service.build import build_broker
    from broker_service.coordinator_link import CoordinatorLink
    from broker_service.errors import BrokerConfigError
    from strata.security.client import internal_headers
    from strata.security.guard import SecurityStartError, start_security
    from strata.server.lifecycle import serve
    from strata.server.lookup_sync import attach_lookups, sync_from_args
    from strata.server.priority_threads import set_low_priority_nice

    log = logging.getLogger("strata.broker")
    if args.workers > 1:
        return _supervise(args, log)
    set_low_priority_nice(args.low_priority_nice)  # before any query makes the threads
    try:
        settings, guard = start_security(args, "broker")
        broker = build_broker(args, internal_headers(settings), tls_ca=settings.tls_ca)
    except (BrokerConfigError, SecurityStartError) as e:
        log.error("%s", e)
        return 2
    from strata.query.duck import configure as configure_engine

    configure_engine(broker.settings.engine)  # the merge threads' DuckDB: the same limits, no file access
    from strata.server.memory_trace import trace_from_env

    trace_from_env()  # STRATA_MEMORY_TRACE=SECONDS: where memory goes, for operators
    link = CoordinatorLink(args.coordinator, args.zk, args.zk_base, tls_ca=settings.tls_ca)
    app = create_app(broker, guard, link if (args.coordinator or args.zk) else None)
    node = broker.settings.host
    sync = sync_from_args(args, node, lambda: link.address, internal_headers(settings), settings.tls_ca)
    attach_lookups(app, sync)
    log.info("broker listening on http://%s:%d (%s discovery)", args.bind, args.port, broker_kind(broker))
    # a thread busy with Python (a merge, a large answer made into rows) hands the interpreter lock to
    # the event loop after at most this long at each of the loop's trips through I/O: with rows made
    # on a thread, a cheap request's p90 beside them 32-64 ms at 1 ms against 148-294 at Python's 5
    # (python -m bench.loop_hold; on the loop: 378-440)
    sys.setswitchinterval(args.switch_interval_ms / 1000)
    return serve(
        app, args.bind, args.port, drain_s=args.drain_seconds, reuse_port=args.reuse_port, tls=settings.tls
    )


def _supervise(args: argparse.Namespace, log: logging.Logger) -> int:
    """`--workers N`: N copies of this very command line, one worker each, on the same port."""
    from strata.server.lifecycle import supervise_workers

    if args.port == 0:
        log.error("--workers needs a fixed --port (each worker binds it)")
        return 2
    flags = ["-P"] if sys.flags.safe_path else []
    argv = [sys.executable, *flags, "-m", "strata.cli.main", *sys.argv[1:], "--workers", "1", "--reuse-port"]
    log.info("broker on http://%s:%d with %d worker processes", args.bind, args.port, args.workers)
    return supervise_workers(argv, args.workers, stop_timeout_s=args.drain_seconds + 15)


def _switch_interval_ms(text: str) -> float:
    value = float(text)
    if not 0 < value <= 1000:
        raise argparse.ArgumentTypeError(f"{text}: a number of milliseconds over 0, at most 1000")
    return value


def broker_kind(broker: object) -> str:
    inventory = getattr(broker, "inventory", None)
    return inventory.status().kind if inventory is not None else "no"
