"""S3 deep storage beside a local directory: ingestion into each, and a historical's loader pulling
segments from S3 beside pyarrow copying the same objects raw.

    python -m bench.deep_storage [--rows 1000000] [--segments 100] [--segment-rows 100000] [--repeat 4]
    python -m bench.deep_storage --rows 10000000      # the issue's size

The S3 store is moto's server mode on loopback (`harness.s3_server`), a Python process sharing the
machine's cores with the benchmark: its figures measure Strata's S3 path against the same server,
not what AWS S3 would give.

1. ingestion: `--rows` synthetic rows over 96 hours (the cluster benchmarks' rows, Parquet input,
   96 hourly segments), the local engine writing into a directory and into S3, alternating,
   `--repeat` rounds each; medians and their ratio.
2. loading: `--segments` segments of `--segment-rows` rows pushed to S3, then pulled into an empty
   segment cache by the historical's `SegmentLoader` (download, SHA-256 and size checked against
   the loadSpec, Parquet footer read, rename into place; queries reading Parquet, so no Arrow copy)
   beside pyarrow streaming the same objects into local files with nothing checked. Both use the
   loader's two threads. Target: Strata's MB/s at least 0.8x the raw copy's.

Prints a table and, last, one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from bench.ingest import HOURS, _hourly, _hourly_spec
from harness.s3_server import S3Server, client_env
from historical_service.loader import SegmentLoader
from strata.ingestion.api import ingest
from strata.storage.deep_storage import HASH_CHUNK
from strata.storage.s3_deep_storage import S3DeepStorage
from timeline import DataSegment

LOAD_TARGET = 0.8
WORKERS = 2  # the historical loader's default thread count


@dataclass
class Load:
    seconds: float
    bytes: int
    segments: int

    @property
    def mb_s(self) -> float:
        return self.bytes / 1e6 / self.seconds

    @property
    def segments_s(self) -> float:
        return self.segments / self.seconds


def _ingest_rounds(rows: int, repeat: int, work: Path, s3: S3Server) -> dict[str, Any]:
    source = work / "rows.parquet"
    _hourly(source, rows)
    spec = _hourly_spec(source)
    local_s: list[float] = []
    s3_s: list[float] = []
    for i in range(repeat):
        for side, times in (("local", local_s), ("s3", s3_s)):
            if side == "s3":
                s3.create_bucket(f"ingest-{i}")
                deep: Any = S3DeepStorage(f"s3://ingest-{i}/deep", endpoint=s3.endpoint)
            else:
                deep = work / f"local{i}"
            began = time.perf_counter()
            summary = ingest(spec, deep_storage=deep, metadata=work / f"{side}{i}.db", engine="local")
            times.append(time.perf_counter() - began)
            assert summary.rows_ingested == rows and len(summary.segments) == HOURS
    ml, ms = statistics.median(local_s), statistics.median(s3_s)
    return {"rows": rows, "segments": HOURS, "input_mb": round(source.stat().st_size / 1e6, 1),
            "local_s": round(ml, 3), "local_s_all": [round(t, 3) for t in local_s],
            "s3_s": round(ms, 3), "s3_s_all": [round(t, 3) for t in s3_s],
            "local_rows_per_s": round(rows / ml), "s3_rows_per_s": round(rows / ms),
            "s3_over_local": round(ms / ml, 2)}  # fmt: skip


def _push_segments(deep: S3DeepStorage, count: int, rows: int, work: Path) -> list[DataSegment]:
    """`count` hourly segments of `rows` rows each, built once and pushed (each its own object)."""
    from bench.cluster_setup import synthetic_rows
    from timeline import Interval

    table = synthetic_rows(rows, 1, seed=11)
    built = work / "built"
    built.mkdir()
    pq.write_table(table, built / "index.parquet", compression="zstd")
    hour = 3_600_000
    start = 1_600_000_000_000 // hour * hour
    return [
        deep.push(built, DataSegment("load", Interval(start + i * hour, start + (i + 1) * hour), "v1"))
        for i in range(count)
    ]


def _strata_load(deep: S3DeepStorage, segments: list[DataSegment], cache: Path) -> Load:
    loader = SegmentLoader(cache, deep, max_workers=WORKERS, arrow=False)

    async def all_of_them() -> list[Any]:
        return await asyncio.gather(*(loader.load(s) for s in segments))

    try:
        began = time.perf_counter()
        loaded = asyncio.run(all_of_them())
        took = time.perf_counter() - began
    finally:
        loader.close()
    assert not any(r.reused for r in loaded)
    return Load(took, sum(r.bytes for r in loaded), len(loaded))


def _raw_copy(deep: S3DeepStorage, segments: list[DataSegment], out: Path) -> Load:
    out.mkdir()
    fs = deep.fs

    def copy(i: int) -> int:
        target = out / f"{i}.parquet"
        with fs.open_input_stream(deep.location_of(segments[i])) as src, target.open("wb") as dst:
            while chunk := src.read(HASH_CHUNK):
                dst.write(chunk)
        return target.stat().st_size

    began = time.perf_counter()
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        sizes = list(pool.map(copy, range(len(segments))))
    return Load(time.perf_counter() - began, sum(sizes), len(sizes))


def _load_rounds(count: int, rows: int, repeat: int, work: Path, s3: S3Server) -> dict[str, Any]:
    s3.create_bucket("load")
    deep = S3DeepStorage("s3://load/deep", endpoint=s3.endpoint)
    segments = _push_segments(deep, count, rows, work)
    strata: list[Load] = []
    raw: list[Load] = []
    for i in range(repeat):  # alternating (ABBA), so both see the same machine load and warmth
        first_raw = i % 2 == 0
        if first_raw:
            raw.append(_raw_copy(deep, segments, work / f"raw{i}"))
        strata.append(_strata_load(deep, segments, work / f"cache{i}"))
        if not first_raw:
            raw.append(_raw_copy(deep, segments, work / f"raw{i}"))
    ms = statistics.median(r.mb_s for r in strata)
    mr = statistics.median(r.mb_s for r in raw)
    return {"segments": count, "rows_per_segment": rows, "total_mb": round(strata[0].bytes / 1e6, 1),
            "strata_mb_s": round(ms, 1), "strata_mb_s_all": [round(r.mb_s, 1) for r in strata],
            "strata_segments_s": round(statistics.median(r.segments_s for r in strata), 1),
            "raw_mb_s": round(mr, 1), "raw_mb_s_all": [round(r.mb_s, 1) for r in raw],
            "raw_segments_s": round(statistics.median(r.segments_s for r in raw), 1),
            "strata_over_raw": round(ms / mr, 2), "target": LOAD_TARGET,
            "met": ms / mr >= LOAD_TARGET}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000, help="rows to ingest (the issue's run: 10000000)")
    ap.add_argument("--segments", type=int, default=100, help="segments the historical loads")
    ap.add_argument("--segment-rows", type=int, default=100_000, help="rows per loaded segment")
    ap.add_argument("--repeat", type=int, default=4, help="rounds of each side (medians are compared)")
    args = ap.parse_args(argv)
    os.environ.update(client_env())
    repeat = max(1, args.repeat)
    with tempfile.TemporaryDirectory(prefix="bench-deep-storage-") as tmp:
        work = Path(tmp)
        s3 = S3Server(log=work / "moto.log").start()
        try:
            ingestion = _ingest_rounds(args.rows, repeat, work, s3)
            loading = _load_rounds(args.segments, args.segment_rows, repeat, work, s3)
        finally:
            s3.stop()
    i, ld = ingestion, loading
    print(f"ingestion of {i['rows']:,} rows into {i['segments']} hourly segments"
          f" ({i['input_mb']} MB Parquet input)")  # fmt: skip
    print(
        f"  local directory {i['local_s']:>8.2f} s  {i['local_rows_per_s']:>10,} rows/s  {i['local_s_all']}"
    )
    print(f"  S3 (moto)       {i['s3_s']:>8.2f} s  {i['s3_rows_per_s']:>10,} rows/s  {i['s3_s_all']}")
    print(f"  S3 / local      {i['s3_over_local']:>8.2f}x")
    print(f"loading {ld['segments']} segments ({ld['total_mb']} MB) from S3 with {WORKERS} threads")
    print(f"  historical loader {ld['strata_mb_s']:>7.1f} MB/s {ld['strata_segments_s']:>7.1f} segments/s"
          f"  {ld['strata_mb_s_all']}")  # fmt: skip
    print(f"  pyarrow raw copy  {ld['raw_mb_s']:>7.1f} MB/s {ld['raw_segments_s']:>7.1f} segments/s"
          f"  {ld['raw_mb_s_all']}")  # fmt: skip
    print(f"  loader / raw      {ld['strata_over_raw']:>7.2f}x (target >= {LOAD_TARGET}x: "
          f"{'met' if ld['met'] else 'NOT met'})")  # fmt: skip
    print(json.dumps({"bench": "deep_storage", "ingestion": ingestion, "loading": loading}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
