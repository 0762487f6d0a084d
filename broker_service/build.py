"""Assemble a Broker from command-line settings (inventory, cache, limits)."""

from __future__ import annotations

import argparse
from collections.abc import Mapping

from broker_service.broker import Broker, BrokerSettings
from broker_service.errors import BrokerConfigError
from broker_service.inventory.base import ServerInventory
from broker_service.inventory.http_inventory import HttpInventory, parse_node
from broker_service.inventory.zk_inventory import ZkInventory
from broker_service.laning import Laning, LaningConfigError, hilo, manual, parse_lane_flag
from broker_service.query_runner import RunnerLimits
from broker_service.server_view import BrokerServerView
from strata.discovery.addresses import AddressError
from strata.query.duck import EngineLimits
from strata.server.address_flags import node_address
from strata.server.engine_flags import engine_limits


def broker_address(args: argparse.Namespace) -> str:
    """The name the broker reports as its own (`host` of error bodies); it announces nothing."""
    try:
        return str(node_address(args))
    except AddressError as e:
        raise BrokerConfigError(str(e)) from None


def engine(args: argparse.Namespace) -> EngineLimits:
    """The relational engine's limits (and this process's spill directory); the broker's engines
    read only the Arrow tables handed to them, so they run without file or network access."""
    if args.default_query_timeout < 0 or args.max_query_timeout < 0:
        raise BrokerConfigError("--default-query-timeout and --max-query-timeout must be >= 0")
    if args.max_subquery_rows < 1 or (args.max_subquery_bytes is not None and args.max_subquery_bytes < 1):
        raise BrokerConfigError("--max-subquery-rows and --max-subquery-bytes must be positive")
    try:
        return engine_limits(args, external_access=False)
    except ValueError as e:
        raise BrokerConfigError(str(e)) from None


def _within(default_ms: int, max_ms: int) -> int:
    """The default timeout held to the maximum (a default past it would refuse every query that
    sets none, as Druid's would)."""
    return default_ms if max_ms <= 0 or 0 < default_ms <= max_ms else max_ms


def laning_of(args: argparse.Namespace) -> Laning:
    """The lanes `--laning` and its flags configure, checked as Druid checks its scheduler's."""
    total = args.max_concurrent_queries
    try:
        if args.laning == "hilo":
            if args.laning_max_low_percent is None:
                raise LaningConfigError("--laning hilo needs --laning-max-low-percent")
            return hilo(total, args.laning_max_low_percent)
        if args.laning == "manual":
            lanes = dict(parse_lane_flag(text) for text in args.lane)
            return manual(total, lanes, args.lane_limits_percent)
    except LaningConfigError as e:
        raise BrokerConfigError(str(e)) from None
    if args.lane:
        raise BrokerConfigError("--lane needs --laning manual")
    return Laning()


def build_broker(
    args: argparse.Namespace, node_headers: Mapping[str, str] | None = None, tls_ca: str | None = None
) -> Broker:
    """`node_headers`: sent on every call to a data node (the internal identity when secured);
    `tls_ca`: the data nodes serve HTTPS with certificates from this CA."""
    view = BrokerServerView(lost_segment_grace_s=max(0.0, args.lost_segment_grace))
    discovery = args.discovery or ("zk" if args.zk else "http")
    inventory: ServerInventory
    if discovery == "zk":
        if not args.zk:
            raise BrokerConfigError("--discovery zk needs --zk HOST:PORT,...")
        inventory = ZkInventory(view, args.zk, base_path=args.zk_base)
    else:
        if not args.nodes:
            raise BrokerConfigError("--discovery http needs --nodes HOST:PORT,...")
        try:
            nodes = [parse_node(n) for n in args.nodes.split(",") if n.strip()]
        except ValueError as e:
            raise BrokerConfigError(str(e)) from None
        inventory = HttpInventory(view, nodes, headers=node_headers, tls_ca=tls_ca)
    if args.max_concurrent_queries < 1 or args.query_queue < 0:
        raise BrokerConfigError("--max-concurrent-queries must be >= 1 and --query-queue >= 0")
    if args.max_scatter_gather_bytes < 0:
        raise BrokerConfigError("--max-scatter-gather-bytes must be >= 0 (0: no limit)")
    settings = BrokerSettings(
        host=broker_address(args),
        max_concurrent_queries=args.max_concurrent_queries,
        query_queue=args.query_queue,
        merge_threads=max(1, args.merge_threads),
        limits=RunnerLimits(
            default_timeout_ms=_within(args.default_query_timeout, args.max_query_timeout),
            max_timeout_ms=args.max_query_timeout,
            max_scatter_gather_bytes=args.max_scatter_gather_bytes,
        ),
        engine=engine(args),
        max_subquery_rows=args.max_subquery_rows,
        max_subquery_bytes=args.max_subquery_bytes,
        merge_processes=max(0, args.merge_processes),
        merge_process_rows=max(1, args.merge_process_rows),
        release_memory_s=max(0.0, args.release_memory_seconds),
        laning=laning_of(args),
    )
    cache_policy = result_cache = None
    if args.cache != "none":
        from broker_service.result_cache import ResultLevelCache
        from broker_service.segment_cache import build_cache_policy
        from cache import CacheKey

        cache_policy = build_cache_policy(args.cache, args.cache_size, args.memcached)
        if args.result_cache == "on":
            result_cache = ResultLevelCache(cache_policy.cache, CacheKey)
    return Broker(
        settings,
        view,
        inventory,
        cache_policy=cache_policy,
        cache_kind=args.cache,
        result_cache=result_cache,
        node_headers=node_headers,
        tls_ca=tls_ca,
    )
