"""Ingestion throughput of the local engine beside DuckDB writing the same rows to Parquet.

    python -m bench.ingest [--rows 10000000]

Prints a table and, last, one JSON line. Target: the local engine within 2x of DuckDB's time.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=10_000_000, help="synthetic dataset size")
    args = ap.parse_args(argv)
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        spec = json.loads(WIKIPEDIA_INDEX_SPEC.read_text())
        spec["spec"]["ioConfig"]["inputSource"]["baseDir"] = str(WIKIPEDIA_SAMPLE.parent)
        # best of 3 each: the first run also pays one-off imports
        t_strata, n = min(_strata(spec, work / f"wiki{i}") for i in range(3))
        t_duck = min(
            _duckdb_copy(
                f"SELECT * FROM read_json('{WIKIPEDIA_SAMPLE}', format='newline_delimited')",
                work / f"wiki_duck{i}.parquet",
            )
            for i in range(3)
        )
        results.append(("wikipedia (json.gz)", n, t_strata, t_duck))

        synth = work / "synthetic.parquet"
        _synthetic(synth, args.rows)
        spec = {
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
                    "inputSource": {"type": "local", "files": [str(synth)]},
                    "inputFormat": {"type": "parquet"},
                },
                "tuningConfig": {"partitionsSpec": {"type": "dynamic", "maxRowsPerSegment": 5_000_000}},
            },
        }
        t_strata, n = _strata(spec, work / "synth")
        t_duck = _duckdb_copy(f"SELECT * FROM read_parquet('{synth}')", work / "synth_duck.parquet")
        results.append((f"synthetic {args.rows:,} (parquet)", n, t_strata, t_duck))

    print(
        f"{'dataset':<32}{'rows':>12}{'strata s':>10}{'rows/s':>12}{'duckdb s':>10}{'rows/s':>12}{'ratio':>7}"
    )
    for name, n, ts, td in results:
        print(f"{name:<32}{n:>12,}{ts:>10.2f}{n / ts:>12,.0f}{td:>10.2f}{n / td:>12,.0f}{ts / td:>7.2f}")
    out = {
        "bench": "ingest",
        "results": [
            {
                "dataset": name,
                "rows": n,
                "strata_s": round(ts, 3),
                "strata_rows_per_s": round(n / ts),
                "duckdb_s": round(td, 3),
                "duckdb_rows_per_s": round(n / td),
                "ratio": round(ts / td, 2),
            }
            for name, n, ts, td in results
        ],
    }
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
