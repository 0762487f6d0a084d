"""Timeline benchmark: 100,000 hourly segments, lookups, removals, memory; bucketing 10M rows.

    python -m bench.timeline [--segments 100000] [--lookups 2000]

Prints a table and, last, one JSON line with the figures.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import statistics
import time
import tracemalloc

import numpy as np

from timeline import DataSegment, Granularity, Interval, ShardSpec, VersionedIntervalTimeline

HOUR = 3_600_000
DAY = 24 * HOUR
START = 1_420_070_400_000  # 2015-01-01


def make_segments(count: int) -> list[DataSegment]:
    """Hourly v1 segments (3 partitions every 10th hour) and a v2 overwrite every 50th hour."""
    segments: list[DataSegment] = []
    load_spec = {"type": "local", "path": "/deep/wiki"}
    dims = ("channel", "page", "user")
    hour = 0
    while len(segments) < count:
        interval = Interval(START + hour * HOUR, START + (hour + 1) * HOUR)
        parts = 3 if hour % 10 == 0 else 1
        for p in range(parts):
            shard = ShardSpec.numbered(p, parts) if parts > 1 else ShardSpec.none()
            version = "2015-01-01T00:00:00.000Z"
            segments.append(DataSegment("wiki", interval, version, load_spec, dims, (), shard))
        if hour % 50 == 0:
            segments.append(DataSegment("wiki", interval, "2015-06-01T00:00:00.000Z", load_spec, dims, ()))
        hour += 1
    return segments[:count]


def percentile(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


BUCKETED_GRANULARITIES = {
    "hour": "hour",
    "month": "month",
    "day_los_angeles": {"type": "period", "period": "P1D", "timeZone": "America/Los_Angeles"},
    "hour_kolkata": {"type": "period", "period": "PT1H", "timeZone": "Asia/Kolkata"},
    "quarter_berlin": {"type": "period", "period": "P3M", "timeZone": "Europe/Berlin"},
}


def bucketing_figures(rng: random.Random, rows: int = 10_000_000) -> dict[str, float]:
    """Milliseconds to bucket 10M timestamps spread over one year (vectorised path)."""
    times = np.random.default_rng(rng.randrange(2**32)).integers(START, START + 365 * DAY, rows)
    out = {}
    for name, spec in BUCKETED_GRANULARITIES.items():
        granularity = Granularity.parse(spec)
        t = time.perf_counter()
        granularity.bucket_starts(times)
        out[f"bucket_10m_{name}_ms"] = round((time.perf_counter() - t) * 1000, 1)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--segments", type=int, default=100_000)
    parser.add_argument("--lookups", type=int, default=2000)
    args = parser.parse_args(argv)
    rng = random.Random(42)

    segments = make_segments(args.segments)
    span_hours = (segments[-1].interval.end - START) // HOUR

    # memory: a separate build under tracemalloc (which slows it), then the timed build
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    measured: VersionedIntervalTimeline[DataSegment] = VersionedIntervalTimeline()
    for seg in segments:
        measured.add_segment(seg, seg)
    timeline_bytes = tracemalloc.get_traced_memory()[0] - before
    sample = make_segments(min(10_000, args.segments))
    segment_bytes = (tracemalloc.get_traced_memory()[0] - before - timeline_bytes) / len(sample)
    tracemalloc.stop()
    del measured, sample
    gc.collect()

    tl: VersionedIntervalTimeline[DataSegment] = VersionedIntervalTimeline()
    t0 = time.perf_counter()
    for seg in segments:
        tl.add_segment(seg, seg)
    add_s = time.perf_counter() - t0

    def lookups(width: int, n: int) -> tuple[list[float], int]:
        times, found = [], 0
        for _ in range(n):
            start = START + rng.randrange(0, max(1, span_hours * HOUR - width), HOUR)
            window = Interval(start, start + width)
            t = time.perf_counter()
            holders = tl.lookup(window)
            times.append((time.perf_counter() - t) * 1e6)
            found += len(holders)
        return times, found

    day_us, day_found = lookups(DAY, args.lookups)
    month_us, _ = lookups(30 * DAY, max(50, args.lookups // 10))

    victims = rng.sample(segments, 1000)
    t0 = time.perf_counter()
    for seg in victims:
        tl.remove_segment(seg, seg)
    remove_s = time.perf_counter() - t0

    bucket_ms = bucketing_figures(rng)
    figures = {
        "segments": len(segments),
        "add_total_s": round(add_s, 3),
        "add_per_segment_us": round(add_s / len(segments) * 1e6, 2),
        "lookup_1d_median_us": round(statistics.median(day_us), 1),
        "lookup_1d_p99_us": round(percentile(day_us, 0.99), 1),
        "lookup_1d_holders": round(day_found / args.lookups, 1),
        "lookup_30d_median_us": round(statistics.median(month_us), 1),
        "lookup_30d_p99_us": round(percentile(month_us, 0.99), 1),
        "remove_1000_s": round(remove_s, 4),
        "timeline_bytes_per_segment": round(timeline_bytes / len(segments)),
        "datasegment_bytes_per_segment": round(segment_bytes),
        **bucket_ms,
    }
    targets = {"lookup_1d_median_us": 50, "add_total_s": 2.0, "timeline_bytes_per_segment": 1024}
    print(f"{'figure':32} {'value':>12} {'target':>10}")
    for key, value in figures.items():
        target = targets.get(key)
        mark = "" if target is None else ("  ok" if value < target else "  MISSED")
        print(f"{key:32} {value:>12} {'' if target is None else '< ' + str(target):>10}{mark}")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
