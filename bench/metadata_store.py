"""The metadata store: publish-to-announced latency, and what an unchanged poll costs.

    python -m bench.metadata_store [--publishes 100] [--poll-publishes 20] [--segments 100000]

Runs a throw-away PostgreSQL (Debian's package, harness.postgres) and measures, in one run:
- publish-to-announced: a real historical on PostgreSQL (poll period 60 s, so what arrives sooner
  came by LISTEN/NOTIFY) is sent one new segment at a time; the time from the publish's commit until
  the historical's HTTP change feed announces it (the segment's load from local deep storage
  included), p50/p99/max; beside the same on SQLite, where only polling (the default 5 s period)
  finds it;
- `used_segments()` over `--segments` used segments on each store: the first read, an unchanged
  read (what every poll of a quiet cluster costs), the read after one segment changed, and a plain
  re-read of every row (what an unremembered poll would cost).
Nothing is asserted; the figures are printed, then one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa

from bench.measure import log
from harness.postgres import PostgresServer
from harness.processes import StrataProcess
from strata.storage import LocalDeepStorage, open_metadata_store
from strata.storage.metadata_store import MetadataStore
from strata.storage.segment_file import write_segment_file
from timeline import DataSegment, Interval, ShardSpec

DAY_MS = 86_400_000
START_MS = 1_441_065_600_000  # 2015-09-01
VERSION = "2024-01-01T00:00:00.000Z"


def _segment(day: int, data_source: str = "bench") -> DataSegment:
    start = START_MS + day * DAY_MS
    shard = ShardSpec.from_json({"type": "numbered", "partitionNum": 0, "partitions": 1})
    return DataSegment(data_source, Interval(start, start + DAY_MS), VERSION,
                       {"type": "local", "path": f"/x/{day}"}, ("page",), ("count",), shard)  # fmt: skip


def _pushed(deep: LocalDeepStorage, day: int) -> DataSegment:
    """A small real segment (20 rows) in deep storage, ready to publish."""
    seg = _segment(day)
    start = seg.interval.start
    table = pa.table({
        "__time": pa.array([start + i * 60_000 for i in range(20)], pa.timestamp("ms", tz="UTC")),
        "page": pa.array([f"p{i % 3}" for i in range(20)]), "count": pa.array([1] * 20, pa.int64()),
    })  # fmt: skip
    staging = deep.staging_dir()
    facts = {"dataSource": seg.data_source, "interval": str(seg.interval), "version": VERSION,
             "partitionNum": 0, "dimensions": [{"name": "page", "type": "string"}],
             "metrics": [{"type": "count", "name": "count"}], "queryGranularity": "none",
             "rollup": False, "numRows": 20}  # fmt: skip
    write_segment_file(table, staging / "index.parquet", facts)
    return deep.push(staging, seg)


class _Announcements(threading.Thread):
    """Follows a node's change feed (long-poll) and notes when each segment id first appears."""

    def __init__(self, url: str):
        super().__init__(daemon=True)
        self.url, self.stop = url, threading.Event()
        self.seen: dict[str, float] = {}

    def run(self) -> None:
        counter, hash_ = -1, 0
        with httpx.Client(timeout=30) as client:
            while not self.stop.is_set():
                params = {"counter": counter, "hash": hash_, "timeout": 500}
                response = client.get(self.url + "/druid-internal/v1/segments", params=params)
                now = time.perf_counter()
                if response.status_code != 200:
                    continue
                body = response.json()
                if body.get("resetCounter"):
                    counter, hash_ = -1, 0
                    continue
                counter, hash_ = body["counter"]["counter"], body["counter"]["hash"]
                for change in body["requests"]:
                    if change.get("action") == "load":
                        segment = {k: v for k, v in change.items() if k != "action"}
                        self.seen.setdefault(DataSegment.from_json(segment).id, now)


@contextmanager
def _historical(root: Path, metadata: str, poll_s: float) -> Iterator[StrataProcess]:
    args = ["--deep-storage", str(root / "deep"), "--metadata", metadata, "--replicas", "1",
            "--segment-cache", str(root / "cache"), "--poll-period", str(poll_s)]  # fmt: skip
    node = StrataProcess("historical", args, root / "historical.log").start(timeout=60)
    try:
        yield node
    finally:
        node.stop()


def publish_to_announced(
    root: Path, metadata: str, publishes: int, poll_s: float, gap_s: float
) -> dict[str, Any]:
    deep = LocalDeepStorage(root / "deep")
    latencies, publish_s = [], []
    with closing(open_metadata_store(metadata)) as store, _historical(root, metadata, poll_s) as node:
        feed = _Announcements(node.url)
        feed.start()
        for day in range(publishes):
            seg = _pushed(deep, day)
            time.sleep(random.uniform(0, gap_s))  # a publish lands anywhere in the poll period
            t0 = time.perf_counter()
            store.publish([seg], overwrite=False)
            committed = time.perf_counter()
            publish_s.append(committed - t0)
            deadline = committed + poll_s + 30
            while seg.id not in feed.seen and time.perf_counter() < deadline:
                time.sleep(0.002)
            if seg.id not in feed.seen:
                raise RuntimeError(
                    f"{seg.id} not announced within {poll_s + 30:.0f}s:\n{node.log_text()[-3000:]}"
                )
            latencies.append(feed.seen[seg.id] - committed)
        feed.stop.set()
    return {"publishes": publishes, "poll_period_s": poll_s, **_quantiles("announce", latencies),
            "publish_median_ms": round(statistics.median(publish_s) * 1e3, 2)}  # fmt: skip


def _quantiles(name: str, samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return {f"{name}_p50_ms": round(statistics.median(ordered) * 1e3, 1),
            f"{name}_p99_ms": round(p99 * 1e3, 1), f"{name}_max_ms": round(ordered[-1] * 1e3, 1)}  # fmt: skip


def _timed(fn: Any, repeat: int) -> float:
    """Median seconds of `fn()` over `repeat` calls."""
    samples = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t)
    return statistics.median(samples)


def poll_cost(metadata: str, segments: int, repeat: int) -> dict[str, Any]:
    with closing(open_metadata_store(metadata)) as writer:
        for start in range(0, segments, 10_000):
            writer.publish(
                [_segment(d) for d in range(start, min(segments, start + 10_000))], overwrite=False
            )
        with closing(open_metadata_store(metadata)) as reader:
            first = _timed(reader.used_segments, 1)
            unchanged = _timed(reader.used_segments, repeat)
            changes = []
            for i in range(5):
                writer.publish([_segment(segments + i)], overwrite=False)
                changes.append(_timed(reader.used_segments, 1))
            full = _timed(lambda: _read_every_row(reader), 3)
            assert len(reader.used_segments()) == segments + 5
    return {"segments": segments, "first_read_ms": round(first * 1e3, 1),
            "unchanged_ms": round(unchanged * 1e3, 3),
            "after_one_change_ms": round(statistics.median(changes) * 1e3, 1),
            "every_row_ms": round(full * 1e3, 1)}  # fmt: skip


def _read_every_row(store: MetadataStore) -> int:
    """What a poll costs when nothing is remembered: every used row read and parsed."""
    return len([r for r in store.segments() if r.used])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--publishes", type=int, default=100, help="one-segment publishes timed with notifications"
    )
    ap.add_argument("--poll-publishes", type=int, default=20, help="the same on SQLite (polling)")
    ap.add_argument("--poll-period", type=float, default=5.0, help="the polling historical's period (s)")
    ap.add_argument("--segments", type=int, default=100_000, help="used segments for the poll cost")
    ap.add_argument("--only", choices=["latency", "reads"], help="one half only")
    ap.add_argument("--repeat", type=int, default=200, help="unchanged reads timed")
    args = ap.parse_args(argv)
    if not PostgresServer.available():
        raise SystemExit("PostgreSQL is not installed (scripts/install-system-packages.sh test installs it)")
    result: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench-metadata-") as tmp:
        root = Path(tmp)
        server = PostgresServer().start()
        try:
            os.environ["PGPASSFILE"] = str(server.pgpass)  # the historical finds the password here
            if args.only != "reads":
                log("publish-to-announced, PostgreSQL with notifications ...")
                url = server.create_database("latency")
                result["notify"] = publish_to_announced(
                    root / "pg", url, args.publishes, poll_s=60.0, gap_s=0.2
                )
                log(result["notify"])
                log(f"publish-to-announced, SQLite polling every {args.poll_period:g} s ...")
                sqlite = str(root / "sqlite" / "metadata.db")
                result["poll"] = publish_to_announced(
                    root / "sqlite", sqlite, args.poll_publishes, args.poll_period, gap_s=args.poll_period
                )
                log(result["poll"])
            if args.only != "latency":
                log(f"used_segments() over {args.segments:,} segments ...")
                result["read_postgresql"] = poll_cost(
                    server.create_database("reads"), args.segments, args.repeat
                )
                log(result["read_postgresql"])
                result["read_sqlite"] = poll_cost(str(root / "reads.db"), args.segments, args.repeat)
                log(result["read_sqlite"])
        finally:
            server.remove()
    print(json.dumps({"metadata_store": result}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
