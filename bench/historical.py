"""A real `strata historical` answering timeseries / topN / groupBy beside DuckDB on the same files.

    python -m bench.historical [--rows 10000000] [--segments 100] [--repeat 5] [--dir DIR]

Synthetic rows (numpy) are ingested by Strata's own ingestion into hourly segments (deep storage +
metadata store), cached in --dir so reruns skip generation. A `strata historical` child process
loads them; each query is POSTed as native JSON twice per run: `Accept: application/json` (what a
user gets: merged Druid JSON) and `Accept: application/vnd.apache.arrow.stream` (what a broker
gets: per-segment partials, or one merged partial for groupBy). The in-process engine time for
both (no HTTP: `run_to_json`, `run_for_broker`) and DuckDB running the same aggregation directly
over the same Parquet files are measured in the same run, the contenders taking turns each round.
Figures are medians of --repeat rounds with the min-max spread; the ratio is Strata JSON over
DuckDB (target <= 1.5).
Nothing is asserted: timings go to the console (a table, then one JSON line).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from bench.cluster_setup import ETERNITY, duckdb_baseline
from bench.measure import cpu_seconds
from strata.cli.local_servers import free_port
from strata.engine import SegmentInput, run_for_broker, run_to_json
from strata.query import parse_query
from strata.wire import ARROW_STREAM
from timeline import DataSegment

DATA_SOURCE = "bench_events"
START_MS = 1_577_836_800_000  # 2020-01-01T00:00Z
HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS
COLUMNS = ("json", "arrow", "engine_json", "engine_arrow", "duckdb", "duckdb_arrow")


# -- data ------------------------------------------------------------------------------------------
def synthetic_rows(rows: int, hours: int, seed: int = 11) -> pa.Table:
    """Rows over `hours` hours: string dims of cardinality 50 / ~20k (zipf) / 100k, long + double."""
    rng = np.random.default_rng(seed)

    def strings(prefix: str, codes: np.ndarray, cardinality: int) -> pa.Array:
        names = pa.array([f"{prefix}{i}" for i in range(cardinality)], pa.string())
        return pc.take(names, pa.array(codes, pa.int32()))

    times = START_MS + rng.integers(0, hours * HOUR_MS, rows)
    return pa.table(
        {
            "ts": pa.array(times, pa.int64()).cast(pa.timestamp("ms", tz="UTC")),
            "country": strings("country_", rng.integers(0, 50, rows), 50),
            "page": strings("page_", (rng.zipf(1.2, rows) - 1) % 20_000, 20_000),
            "user": strings("user_", rng.integers(0, 100_000, rows), 100_000),
            "bytes": pa.array(rng.integers(0, 10_000, rows), pa.int64()),
            "latency": pa.array(rng.random(rows) * 100.0, pa.float64()),
        }
    )


def index_spec(source: Path) -> dict[str, Any]:
    return {
        "type": "index_parallel",
        "spec": {
            "dataSchema": {
                "dataSource": DATA_SOURCE,
                "timestampSpec": {"column": "ts", "format": "auto"},
                "dimensionsSpec": {
                    "dimensions": [
                        "country",
                        "page",
                        "user",
                        {"name": "bytes", "type": "long"},
                        {"name": "latency", "type": "double"},
                    ]
                },
                "granularitySpec": {
                    "segmentGranularity": "hour",
                    "queryGranularity": "none",
                    "rollup": False,
                },
            },
            "ioConfig": {
                "inputSource": {"type": "local", "files": [str(source)]},
                "inputFormat": {"type": "parquet"},
            },
            "tuningConfig": {"partitionsSpec": {"type": "dynamic", "maxRowsPerSegment": 5_000_000}},
        },
    }


def prepare(work: Path, rows: int, hours: int) -> list[DataSegment]:
    """Ingest the synthetic rows once; later runs with the same --dir reuse the segments."""
    from strata.ingestion import ingest
    from strata.storage import open_metadata_store

    done = work / "ingested.json"
    if not (done.exists() and json.loads(done.read_text()) == {"rows": rows, "hours": hours}):
        if (work / "metadata.db").exists():
            raise SystemExit(f"{work} holds data of another size; pass another --dir or remove it")
        work.mkdir(parents=True, exist_ok=True)
        source = work / "source.parquet"
        began = time.perf_counter()
        pq.write_table(synthetic_rows(rows, hours), source, row_group_size=1_000_000)
        print(f"generated {rows:,} rows in {time.perf_counter() - began:.1f} s", flush=True)
        began = time.perf_counter()
        summary = ingest(index_spec(source), deep_storage=work / "deep", metadata=work / "metadata.db")
        print(f"ingested {summary.rows_ingested:,} rows in {time.perf_counter() - began:.1f} s", flush=True)
        source.unlink()
        done.write_text(json.dumps({"rows": rows, "hours": hours}))
    store = open_metadata_store(str(work / "metadata.db"))
    try:
        return sorted(store.used_segments(DATA_SOURCE), key=lambda s: s.interval.start)
    finally:
        store.close()


# -- queries ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Case:
    name: str
    native: dict[str, Any]
    duckdb_sql: str  # `{files}` is replaced by the list of segment files


def cases(hours: int) -> list[Case]:
    end = START_MS + hours * HOUR_MS
    iv = [f"{_iso(START_MS)}/{_iso(end)}"]
    sums = [
        {"type": "count", "name": "rows"},
        {"type": "longSum", "name": "bytes", "fieldName": "bytes"},
        {"type": "doubleSum", "name": "latency", "fieldName": "latency"},
    ]
    base = {"dataSource": DATA_SOURCE, "intervals": iv, "aggregations": sums}
    src = "read_parquet([{files}])"
    return [
        Case(
            "count eternity",
            {
                **base,
                "intervals": [ETERNITY],
                "queryType": "timeseries",
                "granularity": "all",
                "aggregations": [{"type": "count", "name": "rows"}],
            },
            f"SELECT count(*) FROM {src}",
        ),
        Case(
            "timeseries hour",
            {**base, "queryType": "timeseries", "granularity": "hour"},
            f"SELECT epoch_ms(__time) // {HOUR_MS} * {HOUR_MS} AS t, count(*), sum(bytes), sum(latency) "
            f"FROM {src} GROUP BY t ORDER BY t",
        ),
        Case(
            "topN page x100",
            {
                **base,
                "queryType": "topN",
                "granularity": "all",
                "dimension": "page",
                "metric": "bytes",
                "threshold": 100,
            },
            f"SELECT page, count(*), sum(bytes) AS b, sum(latency) FROM {src} GROUP BY page "
            "ORDER BY b DESC LIMIT 100",
        ),
        Case(
            "groupBy country,page",
            {
                **base,
                "queryType": "groupBy",
                "granularity": "all",
                "dimensions": ["country", "page"],
                "limitSpec": {
                    "type": "default",
                    "limit": 100,
                    "columns": [{"dimension": "bytes", "direction": "descending"}],
                },
            },
            f"SELECT country, page, count(*), sum(bytes) AS b, sum(latency) FROM {src} "
            "GROUP BY country, page ORDER BY b DESC LIMIT 100",
        ),
        Case(
            "groupBy country (filtered)",
            {
                **base,
                "queryType": "groupBy",
                "granularity": "day",
                "dimensions": ["country"],
                "filter": {
                    "type": "in",
                    "dimension": "page",
                    "values": [f"page_{i}" for i in range(0, 200, 2)],
                },
                "limitSpec": {
                    "type": "default",
                    "limit": 20,
                    "columns": [{"dimension": "latency", "direction": "descending"}],
                },
            },
            f"SELECT epoch_ms(__time) // {DAY_MS} * {DAY_MS} AS t, country, count(*), sum(bytes), "
            f"sum(latency) AS l FROM {src} WHERE page IN ("
            + ", ".join(f"'page_{i}'" for i in range(0, 200, 2))
            + ") GROUP BY t, country ORDER BY l DESC LIMIT 20",
        ),
    ]


def _iso(ms: int) -> str:
    from timeline import format_instant

    return format_instant(ms)


# -- the historical process ------------------------------------------------------------------------
class Historical:
    def __init__(self, work: Path, cache_format: str = "arrow"):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = work / "historical.log"
        argv = [
            sys.executable,
            "-P",
            "-m",
            "strata.cli.main",
            "--log-level",
            "WARNING",
            "historical",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--deep-storage",
            str(work / "deep"),
            "--metadata",
            str(work / "metadata.db"),
            "--segment-cache",
            str(work / "segment-cache"),
            "--replicas",
            "1",
            "--poll-period",
            "1",
            "--segment-cache-format",
            cache_format,
        ]
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def wait_ready(self, segments: int, timeout: float = 300.0) -> float:
        began = time.monotonic()
        while time.monotonic() - began < timeout:
            if self.proc.poll() is not None:
                raise SystemExit(f"strata historical exited:\n{self.log.read_text()[-3000:]}")
            try:
                if httpx.get(self.url + "/status/ready", timeout=2).status_code == 200:
                    served = httpx.get(self.url + "/status", timeout=2).json()["strata"]["segments"]
                    if served >= segments:
                        return time.monotonic() - began
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise SystemExit(f"strata historical not ready after {timeout} s:\n{self.log.read_text()[-3000:]}")

    def cpu(self) -> float:
        return cpu_seconds(self.proc.pid)

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)


def arrow_copies(work: Path, segments: Sequence[DataSegment]) -> pa.Table:
    """The historical's Arrow copies, memory-mapped here too and concatenated (no copy)."""
    tables = []
    for s in segments:
        with pa.memory_map(str(work / "segment-cache" / s.id / "index.arrow")) as source:
            tables.append(pa.ipc.open_file(source).read_all())
    return pa.concat_tables(tables)


def with_cpu(into: list[float], clock: Callable[[], float], fn: Callable[[], Any]) -> Any:
    """`fn()`, appending the CPU seconds `clock` advanced meanwhile (a process's user + system)."""
    before = clock()
    out = fn()
    into.append(clock() - before)
    return out


# -- measuring -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Timing:
    median: float
    low: float
    high: float

    def cell(self) -> str:
        return f"{self.median * 1000:7.0f} ({self.low * 1000:.0f}-{self.high * 1000:.0f})"


def measure(fns: dict[str, Callable[[], Any]], repeat: int) -> dict[str, Timing]:
    """Runs the contenders in turn, `repeat` rounds, so load from other work hits them alike."""
    for fn in fns.values():
        fn()  # warm-up: schema caches, connections, OS page cache
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            began = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - began)
    return {name: Timing(statistics.median(t), min(t), max(t)) for name, t in times.items()}


def post(client: httpx.Client, url: str, native: dict[str, Any], arrow: bool) -> Any:
    headers = {"Accept": ARROW_STREAM} if arrow else {"Accept": "application/json"}
    response = client.post(url + "/druid/v2/", json=native, headers=headers)
    if response.status_code != 200:
        raise SystemExit(f"query failed ({response.status_code}): {response.text[:500]}")
    if arrow:
        return pa.ipc.open_stream(response.content).read_all()
    return response.json()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=10_000_000, help="synthetic rows (default 10M)")
    ap.add_argument("--segments", type=int, default=100, help="hourly segments (default 100)")
    ap.add_argument("--repeat", type=int, default=5, help="timed runs per query (default 5)")
    ap.add_argument("--dir", type=Path, help="data directory, kept and reused (default: under the temp dir)")
    ap.add_argument("--only", help="run only queries whose name contains this text")
    ap.add_argument("--segment-cache-format", choices=["arrow", "parquet"], default="arrow",
                    help="what the historical's queries read (its option of that name)")  # fmt: skip
    args = ap.parse_args(argv)
    work = args.dir or Path(tempfile.gettempdir()) / f"strata-bench-historical-{args.rows}-{args.segments}"
    segments = prepare(work, args.rows, args.segments)
    files = [s.load_spec["path"] for s in segments]
    inputs = [SegmentInput(s.id, s.descriptor, s.load_spec["path"], s.interval) for s in segments]
    file_list = ", ".join(f"'{f}'" for f in files)
    print(f"{len(segments)} segments, {sum(pq.read_metadata(f).num_rows for f in files):,} rows", flush=True)

    duck = duckdb_baseline()
    node = Historical(work, args.segment_cache_format)
    results = []
    try:
        print(f"historical ready in {node.wait_ready(len(segments)):.1f} s (pid {node.proc.pid})", flush=True)
        copies = arrow_copies(work, segments) if args.segment_cache_format == "arrow" else None
        if copies is not None:
            duck.register("arrow_copies", copies)
        with httpx.Client(timeout=600) as client:
            for case in cases(args.segments):
                if args.only and args.only not in case.name:
                    continue
                query = parse_query(case.native)
                sql = case.duckdb_sql.format(files=file_list)
                row: dict[str, Any] = {"query": case.name}
                contenders: dict[str, Callable[[], Any]] = {
                    "json": functools.partial(post, client, node.url, case.native, False),
                    "arrow": functools.partial(post, client, node.url, case.native, True),
                    "engine_json": functools.partial(run_to_json, query, inputs),
                    "engine_arrow": functools.partial(run_for_broker, query, inputs),
                    "duckdb": functools.partial(lambda s: duck.sql(s).fetchall(), sql),
                }
                if copies is not None:  # second baseline: DuckDB over the historical's own Arrow copies
                    over_copies = sql.replace(f"read_parquet([{file_list}])", "arrow_copies")
                    contenders["duckdb_arrow"] = functools.partial(lambda s: duck.sql(s).fetchall(),
                                                                   over_copies)  # fmt: skip
                cpu: dict[str, list[float]] = {}
                clocks = {"json": node.cpu, "arrow": node.cpu, "duckdb": time.process_time}
                for name, clock in clocks.items():  # the historical's own CPU, DuckDB's (this process)
                    contenders[name] = functools.partial(
                        with_cpu, cpu.setdefault(name, []), clock, contenders[name]
                    )
                row.update(measure(contenders, args.repeat))
                row["cpu"] = {k: statistics.median(v) for k, v in cpu.items()}
                results.append(row)
                print(f"  measured {case.name}", flush=True)
    finally:
        node.stop()

    header = (
        f"{'query':<28}{'strata JSON ms':>22}{'strata Arrow ms':>22}{'engine JSON ms':>22}"
        f"{'engine Arrow ms':>22}{'duckdb ms':>22}{'duckdb/Arrow copy ms':>22}{'ratio':>7}{'CPU':>18}"
    )
    print(
        f"\nmedian of {args.repeat} (min-max), {args.rows:,} rows, {len(segments)} segments; "
        f"ratio = strata JSON / duckdb over the Parquet files (target <= 1.5); historical reads "
        f"{args.segment_cache_format}; engine columns: in this process, over the Parquet files; "
        "CPU: the historical's (JSON / Arrow) and DuckDB's, ms per query"
    )
    print(header)
    for r in results:
        cells = "".join(f"{r[k].cell() if k in r else '-':>22}" for k in COLUMNS)
        spent = "{json:.0f} / {arrow:.0f} / {duckdb:.0f}".format(**{k: v * 1000 for k, v in r["cpu"].items()})
        print(f"{r['query']:<28}{cells}{r['json'].median / r['duckdb'].median:>7.2f}{spent:>18}")
    summary = {
        "bench": "historical",
        "rows": args.rows,
        "segments": len(segments),
        "repeat": args.repeat,
        "segment_cache_format": args.segment_cache_format,
        "results": [
            {
                "query": r["query"],
                **{f"{k}_ms": round(r[k].median * 1000, 1) for k in COLUMNS if k in r},
                "ratio_json": round(r["json"].median / r["duckdb"].median, 2),
                "ratio_arrow": round(r["arrow"].median / r["duckdb"].median, 2),
                **{f"{k}_cpu_ms": round(v * 1000, 1) for k, v in r["cpu"].items()},
            }
            for r in results
        ],
    }
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
