"""Cache backend micro-benchmark: `get_many` of 10 keys x 4 KiB, all hits, per backend.

    python -m bench.cache_backends [--iterations 1000] [--memcached HOST:PORT[,HOST:PORT]]

Without --memcached it starts two local memcached servers (and stops them). Backends: the LRU, the
memcached cache on one and on two servers (sync, and async where the servers are asked in parallel),
the hybrid (L1 hits), and the LRU behind the zstd codec. Prints a table, then one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from cache import CacheKey, HybridCache, LruCache, MemcachedCache, ResultCache
from strata.cli.local_servers import MemcachedServer, free_port

KEYS = 10
VALUE_SIZE = 4096


def percentile(sorted_values: list[float], q: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


def summarize(samples_s: list[float]) -> dict[str, float]:
    ordered = sorted(samples_s)
    return {
        "mean_us": round(statistics.fmean(ordered) * 1e6, 1),
        "p50_us": round(percentile(ordered, 0.50) * 1e6, 1),
        "p99_us": round(percentile(ordered, 0.99) * 1e6, 1),
    }


def time_sync(cache: ResultCache, keys: list[CacheKey], iterations: int) -> list[float]:
    samples = []
    for _ in range(iterations):
        start = time.perf_counter()
        found = cache.get_many(keys)
        samples.append(time.perf_counter() - start)
        assert len(found) == len(keys), "benchmark expects all hits"
    return samples


def time_async(cache: ResultCache, keys: list[CacheKey], iterations: int) -> list[float]:
    async def run() -> list[float]:
        samples = []
        for _ in range(iterations):
            start = time.perf_counter()
            found = await cache.aget_many(keys)
            samples.append(time.perf_counter() - start)
            assert len(found) == len(keys), "benchmark expects all hits"
        return samples

    return asyncio.run(run())


@contextmanager
def memcached_servers(spec: str | None) -> Iterator[list[str]]:
    if spec:
        yield spec.split(",")
        return
    servers = [MemcachedServer(port=free_port()).start() for _ in range(2)]
    try:
        yield [s.address for s in servers]
    finally:
        for s in servers:
            s.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--iterations", type=int, default=1000)
    parser.add_argument("--memcached", help="existing servers HOST:PORT,...; default: start two")
    args = parser.parse_args(argv)

    keys = [CacheKey(f"wiki_2015-09-12T{i:02d}:00:00.000Z_v1", b"timeseries-key-%d" % i) for i in range(KEYS)]
    items = {k: os.urandom(VALUE_SIZE // 2) * 2 for k in keys}  # half-compressible
    prefix = "bench" + uuid.uuid4().hex[:8]

    with memcached_servers(args.memcached) as addresses:
        backends: dict[str, tuple[ResultCache, Callable[..., list[float]]]] = {
            "lru": (LruCache(64 * 1024 * 1024), time_sync),
            "memcached 1 server": (MemcachedCache(addresses[:1], prefix=prefix), time_sync),
            "memcached 1 server async": (MemcachedCache(addresses[:1], prefix=prefix), time_async),
            "memcached 2 servers": (MemcachedCache(addresses, prefix=prefix), time_sync),
            "memcached 2 servers async": (MemcachedCache(addresses, prefix=prefix), time_async),
            "memcached 2 servers async ||": (
                MemcachedCache(addresses, prefix=prefix, parallel_fanout=True),
                time_async,
            ),
            "hybrid (L1 hits)": (
                HybridCache(LruCache(64 * 1024 * 1024), MemcachedCache(addresses, prefix=prefix)),
                time_sync,
            ),
        }
        figures: dict[str, dict[str, float]] = {}
        try:
            for name, (cache, timer) in backends.items():
                cache.put_many(items)
                timer(cache, keys, min(100, args.iterations))  # warm up connections and pools
                figures[name] = summarize(timer(cache, keys, args.iterations))
        finally:
            for cache, _ in backends.values():
                cache.close()

    print(f"get_many of {KEYS} keys x {VALUE_SIZE} B, {args.iterations} iterations, all hits")
    print(f"{'backend':30} {'mean us':>9} {'p50 us':>9} {'p99 us':>9}")
    for name, f in figures.items():
        print(f"{name:30} {f['mean_us']:>9} {f['p50_us']:>9} {f['p99_us']:>9}")
    print(json.dumps({"bench": "cache_backends", "iterations": args.iterations, "figures": figures}))


if __name__ == "__main__":
    main()
