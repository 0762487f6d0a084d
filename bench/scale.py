"""A broker for 1,000 data nodes and 1,000,000 segments, proven by simulation.

    python -m bench.scale [--nodes 1000] [--segments 1000000] [--replicas 2] [--datasources 10]
                          [--heap]

Simulated historicals announce themselves and their segments (hourly, over years, each on
`--replicas` nodes; batch znodes of 50 segments as Druid's announcer writes them, with the row
facts a historical adds) in an in-memory ZooKeeper (`bench.memory_zookeeper`); from there on the
code is the broker's own: kazoo's watch recipes, `ZkInventory` (its watch callbacks on the event
thread, parsing, the hand-over to the event loop), `BrokerServerView` and its timelines. Measured:
- `absorb_s`: from the first announcement to a settled view (every callback run, every replica in);
  `absorb_cpu_s`: the CPU time this process spent meanwhile (on a busy machine, the steadier figure),
  `absorb_gc_s` the part of it the cyclic garbage collector took;
- `bytes_per_segment`: the process's resident memory after minus before, over distinct segments;
  (`--heap`: the Python heap under tracemalloc instead, with the lines that allocate most: slower);
- `route_one_day_us` / `route_one_year_ms`: p50 of planning one datasource's query over a day / a
  year (timeline lookup, one descriptor per segment) and picking a server per segment, grouped;
  `route_one_day_p99_us` beside `route_one_day_p99_frozen_us` (the same after `gc.freeze()`) and
  `route_one_day_gc_ms` (the collector's time over the unfrozen routes);
- `node_leave_ms` / `node_join_ms`: one node's session expiring, then the node announcing again.
Nothing is asserted; figures are printed beside their targets, then one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import gc
import json
import os
import random
import statistics
import time
import tracemalloc
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from bench.many_segments import rss_bytes
from bench.memory_zookeeper import MemoryZooKeeper
from broker_service.inventory.zk_inventory import ZkInventory
from broker_service.scatter import group_by_server
from broker_service.segment_plan import plan_segments
from broker_service.server_view import BrokerServerView
from strata.discovery import ServerMetadata, ZkPaths
from strata.query import parse_query

HOUR_MS = 3_600_000
START_MS = 1_420_070_400_000  # 2015-01-01
VERSION = "2015-01-01T00:00:00.000Z"
PER_BATCH = 50  # Druid's segmentsPerNode default
TARGETS = {"bytes_per_segment": 1024, "absorb_s": 120, "route_one_day_us": 100}


def _instant(ms: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(ms // 1000))


class SimulatedCluster:
    """Which node holds which segment: segment `i` is hour `i // datasources` of datasource
    `i % datasources`, on `replicas` distinct nodes drawn at random (as a balancer spreads them)."""

    def __init__(self, nodes: int, segments: int, replicas: int, datasources: int, seed: int = 7):
        if replicas > nodes:
            raise ValueError("more replicas than nodes")
        self.nodes, self.segments, self.replicas, self.datasources = nodes, segments, replicas, datasources
        rng = np.random.default_rng(seed)
        holders = np.empty((segments, replicas), dtype=np.int32)
        holders[:, 0] = rng.integers(0, nodes, segments)
        for r in range(1, replicas):  # distinct nodes: redraw the clashes
            column = rng.integers(0, nodes, segments)
            while (clash := (holders[:, :r] == column[:, None]).any(axis=1)).any():
                column[clash] = rng.integers(0, nodes, int(clash.sum()))
            holders[:, r] = column
        flat_nodes = holders.ravel()
        order = np.argsort(flat_nodes, kind="stable")
        self._held = np.repeat(np.arange(segments, dtype=np.int32), replicas)[order]
        self._bounds = np.searchsorted(flat_nodes[order], np.arange(nodes + 1))

    @property
    def hours(self) -> int:
        return -(-self.segments // self.datasources)

    def name(self, node: int) -> str:
        return f"historical-{node:04d}.sim:8083"

    def held(self, node: int) -> np.ndarray:
        return self._held[self._bounds[node] : self._bounds[node + 1]]

    def batches(self, node: int) -> Iterator[tuple[str, Callable[[], bytes]]]:
        held = self.held(node)
        for b in range(0, len(held), PER_BATCH):
            part = held[b : b + PER_BATCH]
            name = f"{self.name(node)}_historical__default_tier_{b // PER_BATCH}"
            yield name, functools.partial(self.encode, part)

    def encode(self, segment_ids: np.ndarray) -> bytes:
        """A batch znode's JSON as a historical writes it (made when read, see memory_zookeeper)."""
        return ("[" + ",".join(self._segment_json(int(i)) for i in segment_ids) + "]").encode()

    def _segment_json(self, i: int) -> str:
        ds, hour = f"events_{i % self.datasources}", i // self.datasources
        start, end = _instant(START_MS + hour * HOUR_MS), _instant(START_MS + (hour + 1) * HOUR_MS)
        first = START_MS + hour * HOUR_MS
        return (
            f'{{"dataSource":"{ds}","interval":"{start}/{end}","version":"{VERSION}",'
            f'"loadSpec":{{"type":"s3_zip","bucket":"deep","key":"druid/{ds}/{hour}/index.zip"}},'
            '"dimensions":"country,page,user,channel","metrics":"count,added,deleted",'
            '"shardSpec":{"type":"numbered","partitionNum":0,"partitions":1},"binaryVersion":9,'
            f'"size":{500_000 + i % 1000},"numRows":{1000 + i % 97},"minTime":{first},'
            f'"maxTime":{first + HOUR_MS - 1},'
            f'"identifier":"{ds}_{start}_{end}_{VERSION}"}}'
        )

    def interval_text(self, first_hour: int, hours: int) -> str:
        start = START_MS + first_hour * HOUR_MS
        return f"{_instant(start)}/{_instant(start + hours * HOUR_MS)}"


class Simulation:
    """The broker's inventory and view on an event loop in this thread; nodes announce from another."""

    def __init__(self, cluster: SimulatedCluster):
        self.cluster = cluster
        self.zk = MemoryZooKeeper()
        self.paths = ZkPaths("/druid")
        self.view = BrokerServerView()
        self.inventory = ZkInventory(self.view, "memory", client_factory=lambda _hosts: self.zk)

    def announce(self, node: int) -> None:
        name = self.cluster.name(node)
        meta = ServerMetadata(name, name, max_size=10**12)
        self.zk.create(self.paths.announcement(name), meta.to_bytes(), owner=name, makepath=True)
        for batch, data in self.cluster.batches(node):
            self.zk.create(self.paths.batch(name, batch), data, owner=name, makepath=True)

    def announce_all(self, nodes: Iterable[int]) -> None:
        for node in nodes:
            self.announce(node)

    async def timed(self, writes: Callable[[], None]) -> float:
        """Seconds from the first write until the view settled: every watch callback ran (on the
        ZooKeeper event thread) and then everything they handed to the event loop."""
        loop = asyncio.get_running_loop()
        began = time.perf_counter()

        def feed() -> None:
            writes()
            self.zk.wait_idle(3600)

        await loop.run_in_executor(None, feed)
        settled = loop.create_future()
        loop.call_soon_threadsafe(settled.set_result, None)  # after every callback posted before
        await settled
        return time.perf_counter() - began


def route_times(view: BrokerServerView, cluster: SimulatedCluster, hours: int, samples: int) -> list[float]:
    """Seconds to route queries over `hours` of one datasource: plan + pick a server per segment."""
    rng = random.Random(hours)
    out = []
    for _ in range(samples):
        first = rng.randrange(0, max(1, cluster.hours - hours))
        query = parse_query({
            "queryType": "timeseries", "dataSource": f"events_{rng.randrange(cluster.datasources)}",
            "intervals": [cluster.interval_text(first, hours)], "granularity": "all",
            "aggregations": [{"type": "count", "name": "rows"}],
        })  # fmt: skip
        t = time.perf_counter()
        plan = plan_segments(view, query)
        groups, unread = group_by_server(plan.tasks)
        out.append(time.perf_counter() - t)
        assert not unread and sum(len(g[1]) for g in groups.values()) == len(plan.tasks)
    return out


class CollectorClock:
    """CPU seconds the cyclic garbage collector ran, by generation, while installed (`gc.callbacks`;
    the process's CPU time, as nothing else runs Python meanwhile), and how many runs."""

    def __init__(self) -> None:
        self.seconds = [0.0, 0.0, 0.0]
        self.runs = [0, 0, 0]
        self._began = 0.0

    def __enter__(self) -> CollectorClock:
        gc.callbacks.append(self._tick)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._tick)

    def _tick(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._began = time.process_time()
        else:
            self.seconds[info["generation"]] += time.process_time() - self._began
            self.runs[info["generation"]] += 1


def heap_report(snapshot: tracemalloc.Snapshot, segments: int, top: int = 24) -> list[str]:
    stats = snapshot.statistics("lineno")
    lines = []
    for stat in stats[:top]:
        frame = stat.traceback[0]
        where = f"{Path(frame.filename).parent.name}/{Path(frame.filename).name}:{frame.lineno}"
        lines.append(f"  {stat.size / segments:8.0f} B/segment  {where}")
    return lines


async def run(nodes: int, segments: int, replicas: int, datasources: int, heap: bool) -> dict[str, Any]:
    cluster = SimulatedCluster(nodes, segments, replicas, datasources)
    sim = Simulation(cluster)
    await sim.inventory.start()
    gc.collect()
    if heap:
        tracemalloc.start()
    rss_before, heap_before = rss_bytes(os.getpid()), tracemalloc.get_traced_memory()[0]
    cpu_before = time.process_time()
    with CollectorClock() as collector:
        absorb_s = await sim.timed(lambda: sim.announce_all(range(nodes)))
    absorb_cpu_s = time.process_time() - cpu_before
    view = sim.view
    if view.segment_count != segments:
        raise RuntimeError(f"view holds {view.segment_count} segments, expected {segments}")
    gc.collect()
    out: dict[str, Any] = {"nodes": nodes, "segments": segments, "replicas": replicas,
                           "datasources": datasources, "absorb_s": round(absorb_s, 1),
                           "absorb_cpu_s": round(absorb_cpu_s, 1),
                           "absorb_gc_s": round(sum(collector.seconds), 1),
                           "absorb_gc_by_generation_s": [round(s, 2) for s in collector.seconds],
                           "absorb_gc_runs": collector.runs}  # fmt: skip
    if heap:
        out["bytes_per_segment"] = round((tracemalloc.get_traced_memory()[0] - heap_before) / segments)
        out["measured_by"] = "tracemalloc (Python heap)"
        top = heap_report(tracemalloc.take_snapshot(), segments)
        print("where the heap goes (top lines):", *top, sep="\n")
        tracemalloc.stop()
    else:
        out["bytes_per_segment"] = round((rss_bytes(os.getpid()) - rss_before) / segments)
        out["measured_by"] = "resident memory"
    with CollectorClock() as collector:
        day = route_times(view, cluster, 24, 2000)
    year = route_times(view, cluster, 24 * 365, 40)
    out["route_one_day_us"] = round(statistics.median(day) * 1e6, 1)
    out["route_one_day_p99_us"] = round(sorted(day)[int(0.99 * (len(day) - 1))] * 1e6, 1)
    out["route_one_day_gc_ms"] = round(sum(collector.seconds) * 1e3, 1)  # over all 2,000 routes
    # the same again with every object so far moved out of the collector's sight (`gc.freeze()`,
    # the usual remedy for collections walking millions of long-lived objects)
    gc.freeze()
    frozen = route_times(view, cluster, 24, 2000)
    gc.unfreeze()
    out["route_one_day_p99_frozen_us"] = round(sorted(frozen)[int(0.99 * (len(frozen) - 1))] * 1e6, 1)
    out["route_one_year_ms"] = round(statistics.median(year) * 1e3, 2)
    leaving = nodes // 2
    out["node_leave_ms"] = round(1e3 * await sim.timed(lambda: sim.zk.expire(cluster.name(leaving))), 1)
    if view.segment_count != segments or view.server(cluster.name(leaving)) is not None:
        raise RuntimeError("the view did not settle after a node left")
    out["node_join_ms"] = round(1e3 * await sim.timed(lambda: sim.announce(leaving)), 1)
    out["node_segments"] = len(cluster.held(leaving))
    await sim.inventory.stop()
    out["targets"] = TARGETS
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--segments", type=int, default=1_000_000)
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--datasources", type=int, default=10)
    parser.add_argument("--heap", action="store_true", help="memory by tracemalloc, with where it goes")
    args = parser.parse_args(argv)
    figures = asyncio.run(run(args.nodes, args.segments, args.replicas, args.datasources, args.heap))
    print(f"{'figure':24} {'value':>12} {'target':>10}")
    for key, value in figures.items():
        if key == "targets":
            continue
        target = TARGETS.get(key)
        mark = "" if target is None else ("  ok" if value <= target else "  MISSED")
        print(f"{key:24} {value!s:>12} {'' if target is None else '<= ' + str(target):>10}{mark}")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
