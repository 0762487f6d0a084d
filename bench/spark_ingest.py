"""Ingestion throughput of the Spark engine beside the local engine, with DuckDB as the baseline.

    python -m bench.spark_ingest [--rows 1000000] [--repeat 2] [--master local[*]] [--formats parquet,json]

The synthetic dataset of `bench.ingest` (one week of events, six dimensions), as one Parquet file
and as one newline-delimited JSON file. Each round runs the local engine, the Spark engine (on
one session started up front, its start-up reported apart) and DuckDB writing the same rows to
Parquet, alternating so all see the same machine load; medians are compared. Untimed first: a job
with a task per core, so every slot's Python worker is started and has imported the engine (an
ingestion of the small wikipedia sample runs one task and so starts one worker, and the first
timed round then paid the other's start and imports), and one ingestion of the wikipedia sample
with each engine.
Prints a table and, last, one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import duckdb

from bench.ingest import _duckdb_copy, _synthetic, _synthetic_spec
from strata.data import WIKIPEDIA_INDEX_SPEC, WIKIPEDIA_SAMPLE
from strata.ingestion import ingest


def _timed(spec: dict[str, Any], work: Path, **kw: Any) -> tuple[float, int]:
    began = time.perf_counter()
    summary = ingest(spec, deep_storage=work / "deep", metadata=work / "meta.db", **kw)
    return time.perf_counter() - began, summary.rows_ingested


def _warm_workers(spark: Any, cores: int) -> None:
    """Start a Python worker per slot, each with the engine imported (the tasks overlap, so none
    reuses another's worker)."""

    def warm(_: Any) -> None:
        import strata.ingestion.spark_engine  # noqa: F401

        time.sleep(0.5)

    spark.sparkContext.parallelize(range(cores), cores).foreach(warm)


def _json_copy(parquet: Path, out: Path) -> None:
    duckdb.execute(
        f"COPY (SELECT strftime(ts, '%Y-%m-%dT%H:%M:%S.%gZ') AS ts, * EXCLUDE (ts)"
        f" FROM read_parquet('{parquet}')) TO '{out}' (FORMAT json)"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=1_000_000, help="synthetic dataset size")
    ap.add_argument("--repeat", type=int, default=2, help="rounds per dataset (medians are compared)")
    ap.add_argument("--master", default="local[*]", help="Spark master")
    ap.add_argument("--formats", default="parquet,json", help="input formats to run")
    args = ap.parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from strata.ingestion.spark_engine import spark_session

    began = time.perf_counter()
    spark = spark_session(args.master)
    startup = time.perf_counter() - began
    cores = spark.sparkContext.defaultParallelism
    results = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            _warm_workers(spark, cores)
            wiki = json.loads(WIKIPEDIA_INDEX_SPEC.read_text())
            wiki["spec"]["ioConfig"]["inputSource"]["baseDir"] = str(WIKIPEDIA_SAMPLE.parent)
            _timed(wiki, work / "warm-spark", engine="spark", spark=spark)
            _timed(wiki, work / "warm-local", engine="local")
            parquet = work / "synthetic.parquet"
            _synthetic(parquet, args.rows)
            for fmt in [f.strip() for f in args.formats.split(",") if f.strip()]:
                path = parquet if fmt == "parquet" else work / "synthetic.json"
                if fmt == "json":
                    _json_copy(parquet, path)
                spec = _synthetic_spec(path)
                spec["spec"]["ioConfig"]["inputFormat"] = {"type": fmt}
                src = f"read_parquet('{path}')" if fmt == "parquet" else f"read_json('{path}')"
                t_local, t_spark, t_duck = [], [], []
                for i in range(max(1, args.repeat)):
                    took, n = _timed(spec, work / f"{fmt}-local-{i}", engine="local")
                    t_local.append(took)
                    took, n_spark = _timed(spec, work / f"{fmt}-spark-{i}", engine="spark", spark=spark)
                    assert n_spark == n, (n_spark, n)
                    t_spark.append(took)
                    copy = _duckdb_copy(f"SELECT * FROM {src}", work / f"{fmt}-duck-{i}.parquet")
                    t_duck.append(copy.seconds)
                results.append((f"synthetic {args.rows:,} ({fmt}, {path.stat().st_size >> 20} MiB)", n,
                                t_local, t_spark, t_duck))  # fmt: skip
    finally:
        spark.stop()
    print(f"Spark {args.master} ({cores} cores): session start {startup:.1f} s (not in the figures below)")
    head = f"{'dataset':<36}{'rows':>11}{'local s':>9}{'rows/s':>11}{'spark s':>9}{'rows/s':>11}"
    print(head + f"{'duckdb s':>10}{'rows/s':>11}{'spark/local':>12}")
    out = []
    for name, n, tl, ts, td in results:
        ml, ms, md = statistics.median(tl), statistics.median(ts), statistics.median(td)
        print(
            f"{name:<36}{n:>11,}{ml:>9.2f}{n / ml:>11,.0f}{ms:>9.2f}{n / ms:>11,.0f}"
            f"{md:>10.2f}{n / md:>11,.0f}{ms / ml:>12.2f}"
        )
        out.append({
            "dataset": name, "rows": n, "local_s": [round(t, 3) for t in tl],
            "spark_s": [round(t, 3) for t in ts], "duckdb_s": [round(t, 3) for t in td],
            "local_rows_per_s": round(n / ml), "spark_rows_per_s": round(n / ms),
            "duckdb_rows_per_s": round(n / md), "spark_over_local": round(ms / ml, 2),
        })  # fmt: skip
    print(json.dumps({"bench": "spark_ingest", "master": args.master, "cores": cores,
                      "session_start_s": round(startup, 2), "results": out}))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
