"""Ingestion throughput of the local engine beside DuckDB writing the same rows to Parquet.

    python -m bench.ingest [--rows 10000000] [--repeat 3]

Each dataset runs `--repeat` times, Strata and DuckDB alternating so both see the same machine
load; the ratio is of the two medians, and min/max show the spread. One untimed warm-up of each
side on the wikipedia sample pays the one-off imports and DuckDB's JSON extension load.
Prints a table and, last, one JSON line. Target: the local engine within 2x of DuckDB's time.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb

from ingestion import ingest
from strata.data import WIKIPEDIA_INDEX_SPEC, WIKIPEDIA_SAMPLE


def _duckdb_copy(source_sql: str, out: Path) -> float:
    con = duckdb.connect()
    began = time.perf_counter()
    con.execute(f"COPY ({source_sql}) TO '{out}' (FORMAT parquet, COMPRESSION zstd)")
    took = time.perf_counter() - began
    con.close()
    return took


def _strata(spec: dict, work: Path) -> tuple[float, int]:
    began = time.perf_counter()
    summary = ingest(spec, deep_storage=work / "deep", metadata=work / "meta.db")
    return time.perf_counter() - began, summary.rows_ingested


def _synthetic(path: Path, rows: int) -> None:
    duckdb.execute(f"""
        COPY (SELECT
            TIMESTAMP '2020-01-01' + to_milliseconds((i * 7919) % (7 * 86400000)) AS ts,
            'country_' || (hash(i) % 50)::VARCHAR AS country,
            'device_' || (hash(i * 3) % 8)::VARCHAR AS device,
            'page_' || (hash(i * 7) % 20000)::VARCHAR AS page,
            'user_' || (hash(i * 11) % 500000)::VARCHAR AS user_id,
            (hash(i * 13) % 1000)::BIGINT AS bytes,
            (hash(i * 17) % 100000) / 100.0 AS latency
          FROM range({rows}) t(i))
        TO '{path}' (FORMAT parquet)""")


def _rounds(
    repeat: int, strata: Callable[[int], tuple[float, int]], duck: Callable[[int], float]
) -> tuple[int, list[float], list[float]]:
    """Alternate Strata and DuckDB `repeat` times; (rows ingested, Strata times, DuckDB times)."""
    t_strata: list[float] = []
    t_duck: list[float] = []
    rows = 0
    for i in range(repeat):
        took, rows = strata(i)
        t_strata.append(took)
        t_duck.append(duck(i))
    return rows, t_strata, t_duck


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=10_000_000, help="synthetic dataset size")
    ap.add_argument("--repeat", type=int, default=3, help="rounds per dataset (medians are compared)")
    args = ap.parse_args(argv)
    repeat = max(1, args.repeat)
    results: list[tuple[str, int, list[float], list[float]]] = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        wiki_spec = json.loads(WIKIPEDIA_INDEX_SPEC.read_text())
        wiki_spec["spec"]["ioConfig"]["inputSource"]["baseDir"] = str(WIKIPEDIA_SAMPLE.parent)
        wiki_sql = f"SELECT * FROM read_json('{WIKIPEDIA_SAMPLE}', format='newline_delimited')"
        _strata(wiki_spec, work / "warmup")
        _duckdb_copy(wiki_sql, work / "warmup.parquet")
        n, ts, td = _rounds(
            repeat,
            lambda i: _strata(wiki_spec, work / f"wiki{i}"),
            lambda i: _duckdb_copy(wiki_sql, work / f"wiki_duck{i}.parquet"),
        )
        results.append(("wikipedia (json.gz)", n, ts, td))

        synth = work / "synthetic.parquet"
        _synthetic(synth, args.rows)
        spec = _synthetic_spec(synth)
        n, ts, td = _rounds(
            repeat,
            lambda i: _strata(spec, work / f"synth{i}"),
            lambda i: _duckdb_copy(f"SELECT * FROM read_parquet('{synth}')", work / f"synth_duck{i}.parquet"),
        )
        results.append((f"synthetic {args.rows:,} (parquet)", n, ts, td))

    print(
        f"{'dataset':<32}{'rows':>12}{'strata s':>10}{'(min-max)':>13}{'rows/s':>12}"
        f"{'duckdb s':>10}{'(min-max)':>13}{'rows/s':>12}{'ratio':>7}"
    )
    out_rows = []
    for name, n, ts, td in results:
        ms, md = statistics.median(ts), statistics.median(td)
        print(
            f"{name:<32}{n:>12,}{ms:>10.2f}{_spread(ts):>13}{n / ms:>12,.0f}"
            f"{md:>10.2f}{_spread(td):>13}{n / md:>12,.0f}{ms / md:>7.2f}"
        )
        out_rows.append({
            "dataset": name,
            "rows": n,
            "rounds": len(ts),
            "strata_s": round(ms, 3),
            "strata_s_all": [round(t, 3) for t in ts],
            "strata_rows_per_s": round(n / ms),
            "duckdb_s": round(md, 3),
            "duckdb_s_all": [round(t, 3) for t in td],
            "duckdb_rows_per_s": round(n / md),
            "ratio": round(ms / md, 2),
        })  # fmt: skip
    print(json.dumps({"bench": "ingest", "results": out_rows}))
    return 0


def _spread(times: list[float]) -> str:
    return f"({min(times):.2f}-{max(times):.2f})"


def _synthetic_spec(path: Path) -> dict[str, Any]:
    return {
        "type": "index_parallel",
        "spec": {
            "dataSchema": {
                "dataSource": "synthetic",
                "timestampSpec": {"column": "ts", "format": "auto"},
                "dimensionsSpec": {
                    "dimensions": [
                        "country",
                        "device",
                        "page",
                        "user_id",
                        {"name": "bytes", "type": "long"},
                        {"name": "latency", "type": "double"},
                    ]
                },
                "granularitySpec": {
                    "segmentGranularity": "day",
                    "queryGranularity": "none",
                    "rollup": False,
                },
            },
            "ioConfig": {
                "inputSource": {"type": "local", "files": [str(path)]},
                "inputFormat": {"type": "parquet"},
            },
            "tuningConfig": {"partitionsSpec": {"type": "dynamic", "maxRowsPerSegment": 5_000_000}},
        },
    }


if __name__ == "__main__":
    sys.exit(main())
