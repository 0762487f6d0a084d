"""SQL INSERT of a file beside `strata ingest` of the same file, both on the local engine.

    python -m bench.sql_ingest [--rows 10000000] [--repeat 3] [--format parquet|csv|json]

One file of `--rows` rows over a week (`bench.ingest`'s synthetic rows, written by DuckDB from
`range()`: the same rows on every run), its time an ISO 8601 string as in Druid's tutorials. The
SQL side is what a Druid user posts to the broker's SQL task API:

    INSERT INTO t SELECT TIME_PARSE(ts) AS __time, country, ... FROM TABLE(EXTERN(...)) PARTITIONED BY DAY

timed from the POST to the task's SUCCESS seen through the task API (polled every 50 ms), so it
counts the broker's planning, the coordinator's queue and lock, the task's own process and its
publish. The native side is `strata ingest SPEC` run as a command with the spec a user writes for the
same file (the same columns and types, no rollup, day segments), timed from its start to its exit,
so it counts its interpreter's start as the SQL side counts its task process's. Both write into one
deep storage and metadata store (the coordinator's), each round into data sources of its own; the
rounds alternate so both see the same machine load. The ratio is of the two medians; the target is
1.1 (issue 38). Prints a table and, last, one JSON line.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import duckdb
import httpx

from bench.ingest import synthetic_select
from harness.processes import StrataProcess, running

TARGET = 1.1
POLL_S = 0.05
COLUMNS = [("country", "STRING"), ("device", "STRING"), ("page", "STRING"), ("user_id", "STRING"),
           ("bytes", "LONG"), ("latency", "DOUBLE")]  # fmt: skip
_SQL_TYPES = {"STRING": "VARCHAR", "LONG": "BIGINT", "DOUBLE": "DOUBLE"}
_FORMATS = {
    "parquet": ("(FORMAT parquet)", {"type": "parquet"}),
    "csv": ("(FORMAT csv, HEADER true)", {"type": "csv", "findColumnsFromHeader": True}),
    "json": ("(FORMAT json)", {"type": "json"}),
}


def write_rows(path: Path, rows: int, fmt: str) -> None:
    """`bench.ingest`'s synthetic rows, their time an ISO 8601 string as in Druid's tutorials."""
    iso = "strftime(ts, '%Y-%m-%dT%H:%M:%S.%gZ') AS ts, * EXCLUDE (ts)"
    duckdb.execute(f"COPY (SELECT {iso} FROM ({synthetic_select(rows)})) TO '{path}' {_FORMATS[fmt][0]}")


def insert_sql(data_source: str, path: Path, fmt: str) -> str:
    source = json.dumps({"type": "local", "files": [str(path)]})
    extend = ", ".join(f"{name} {_SQL_TYPES[kind]}" for name, kind in [("ts", "STRING"), *COLUMNS])
    names = ", ".join(name for name, _ in COLUMNS)
    return (f"INSERT INTO {data_source} SELECT TIME_PARSE(ts) AS __time, {names} "
            f"FROM TABLE(EXTERN('{source}', '{json.dumps(_FORMATS[fmt][1])}')) EXTEND ({extend}) "
            "PARTITIONED BY DAY")  # fmt: skip


def native_spec(data_source: str, path: Path, fmt: str) -> dict[str, Any]:
    """The index_parallel spec a user writes for the same file: the same columns, no rollup."""
    dimensions = [{"type": kind.lower(), "name": name} for name, kind in COLUMNS]
    return {"type": "index_parallel", "spec": {
        "dataSchema": {
            "dataSource": data_source,
            "timestampSpec": {"column": "ts", "format": "iso"},
            "dimensionsSpec": {"dimensions": dimensions},
            "metricsSpec": [],
            "granularitySpec": {"segmentGranularity": "day", "queryGranularity": "none", "rollup": False},
        },
        "ioConfig": {"type": "index_parallel", "inputSource": {"type": "local", "files": [str(path)]},
                     "inputFormat": _FORMATS[fmt][1]},
        "tuningConfig": {"type": "index_parallel", "maxRowsPerSegment": 3_000_000},
    }}  # fmt: skip


def time_sql(broker: StrataProcess, sql: str) -> tuple[float, dict[str, Any]]:
    """Seconds from the POST to SUCCESS, and the counters of the task's segment stage."""
    began = time.perf_counter()
    resp = httpx.post(f"{broker.url}/druid/v2/sql/task", json={"query": sql}, timeout=120)
    assert resp.status_code == 202, resp.text
    task = f"{broker.url}/druid/indexer/v1/task/{resp.json()['taskId']}"
    while True:
        status = httpx.get(f"{task}/status", timeout=30).json()["status"]
        if status["statusCode"] != "RUNNING":
            took = time.perf_counter() - began
            assert status["statusCode"] == "SUCCESS", status
            reports = httpx.get(f"{task}/reports", timeout=30).json()
            return took, reports["multiStageQuery"]["payload"]["counters"]["1"]["0"]
        time.sleep(POLL_S)


def time_native(spec: Path, deep: Path, metadata: Path) -> tuple[float, dict[str, Any]]:
    """Seconds `strata ingest` runs, and its JSON summary."""
    argv = [sys.executable, "-m", "strata.cli.main", "ingest", str(spec), "--engine", "local",
            "--deep-storage", str(deep), "--metadata", str(metadata), "--json"]  # fmt: skip
    began = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=3600)
    took = time.perf_counter() - began
    assert done.returncode == 0, done.stderr[-3000:]
    return took, json.loads(done.stdout)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=10_000_000, help="rows in the file")
    ap.add_argument("--repeat", type=int, default=3, help="rounds of each side (medians are compared)")
    ap.add_argument("--format", choices=sorted(_FORMATS), default="parquet", help="the file's format")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        data = work / f"rows.{args.format}"
        write_rows(data, args.rows, args.format)
        deep, metadata = work / "deep", work / "meta.db"
        boss = StrataProcess("coordinator", ["--deep-storage", str(deep), "--metadata", str(metadata),
                             "--engine", "local", "--task-log-dir", str(work / "task-logs")],
                             work / "coordinator.log")  # fmt: skip
        # the broker follows one historical, over an empty store of its own: it loads nothing
        # while the rounds run (SQL over EXTERN needs no data node; the broker needs one to follow)
        node = StrataProcess("historical", ["--deep-storage", str(deep), "--metadata", str(work / "none.db"),
                             "--segment-cache", str(work / "cache")], work / "historical.log")  # fmt: skip
        broker = StrataProcess("broker", ["--discovery", "http", "--nodes", node.address,
                               "--coordinator", boss.address], work / "broker.log")  # fmt: skip
        sql_s: list[float] = []
        native_s: list[float] = []
        with running([boss, node, broker]):
            boss.start()
            node.start()
            broker.start()
            time_sql(broker, insert_sql("warmup_sql", data, args.format))  # page cache and bytecode
            for i in range(max(1, args.repeat)):
                took, counters = time_sql(broker, insert_sql(f"sql_{i}", data, args.format))
                sql_s.append(took)
                spec = work / f"native_{i}.json"
                spec.write_text(json.dumps(native_spec(f"native_{i}", data, args.format)))
                took, summary = time_native(spec, deep, metadata)
                native_s.append(took)
                # the same work on both sides: the same rows stored in as many segments
                progress, published = counters["segmentGenerationProgress"], counters["segments"]["published"]
                made = progress["rowsPersisted"], published
                assert made == (summary["rowsIngested"], len(summary["segments"])), (made, summary)
        size_mb = data.stat().st_size / 1e6
    sql_med, native_med = statistics.median(sql_s), statistics.median(native_s)
    ratio = sql_med / native_med
    print(f"{args.rows:,} rows, {args.format} ({size_mb:.0f} MB), local engine, {len(sql_s)} rounds")
    print(f"{'side':<34}{'median s':>10}{'min-max s':>16}{'rows/s':>12}")
    sides = (("SQL INSERT (/druid/v2/sql/task)", sql_s), ("strata ingest (native spec)", native_s))
    for name, times in sides:
        med = statistics.median(times)
        print(f"{name:<34}{med:>10.2f}{f'{min(times):.2f}-{max(times):.2f}':>16}{args.rows / med:>12,.0f}")
    verdict = "within" if ratio <= TARGET else "over"
    print(f"ratio SQL / native {ratio:.2f} ({verdict} the {TARGET}x target)")
    print(json.dumps({"rows": args.rows, "format": args.format, "file_mb": round(size_mb),
                      "sql_s": round(sql_med, 3), "sql_s_all": [round(t, 3) for t in sql_s],
                      "native_s": round(native_med, 3), "native_s_all": [round(t, 3) for t in native_s],
                      "ratio": round(ratio, 3), "target": TARGET}))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
