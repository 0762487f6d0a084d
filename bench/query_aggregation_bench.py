"""Timeseries / topN / groupBy over ~1M rows in 10 segment files vs the same work in plain DuckDB SQL.

Run: python bench/query_aggregation_bench.py  (prints seconds per query, median of 5, and the ratio)
"""

from __future__ import annotations

import functools
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.measure import time_calls
from harness.raw_segments import DAY_MS, write_segments
from strata.engine import run_to_json
from strata.query import parse_query

ROWS, DAYS = 1_000_000, 10
START = 1_577_836_800_000  # 2020-01-01


def rows() -> pa.Table:
    rng = np.random.default_rng(7)
    times = np.sort(START + rng.integers(0, DAYS * 86_400_000, ROWS))
    return pa.table(
        {
            "__time": pa.array(times, pa.int64()).cast(pa.timestamp("ms", tz="UTC")),
            "country": pa.array([f"c{i}" for i in rng.integers(0, 50, ROWS)]),
            "page": pa.array([f"p{i}" for i in rng.zipf(1.3, ROWS) % 20_000]),
            "added": pa.array(rng.integers(0, 1000, ROWS), pa.int64()),
            "score": pa.array(rng.random(ROWS), pa.float64()),
        }
    )


def median_seconds(fn: Callable[[], Any], repeat: int = 5) -> float:
    return statistics.median(time_calls(fn, repeat))


def main() -> None:
    out = Path(tempfile.mkdtemp())
    inputs = write_segments(rows(), out, granularity_ms=DAY_MS, data_source="bench")
    files = ", ".join(f"'{i.path}'" for i in inputs)
    conn = duckdb.connect()
    aggs = [
        {"type": "count", "name": "n"},
        {"type": "longSum", "name": "added", "fieldName": "added"},
        {"type": "doubleMax", "name": "top", "fieldName": "score"},
    ]
    iv = "2020-01-01/2020-01-11"
    cases = {
        "timeseries hour": (
            {
                "queryType": "timeseries",
                "dataSource": "bench",
                "intervals": [iv],
                "granularity": "hour",
                "aggregations": aggs,
            },
            "SELECT epoch_ms(time_bucket(INTERVAL 1 HOUR, __time)) h, count(*), sum(added), max(score) "
            f"FROM read_parquet([{files}]) GROUP BY h ORDER BY h",
        ),
        "topN page x10": (
            {
                "queryType": "topN",
                "dataSource": "bench",
                "intervals": [iv],
                "granularity": "all",
                "dimension": "page",
                "metric": "n",
                "threshold": 10,
                "aggregations": aggs,
            },
            f"SELECT page, count(*) n, sum(added), max(score) FROM read_parquet([{files}]) GROUP BY page "
            "ORDER BY n DESC LIMIT 10",
        ),
        "groupBy country,day": (
            {
                "queryType": "groupBy",
                "dataSource": "bench",
                "intervals": [iv],
                "granularity": "day",
                "dimensions": ["country"],
                "aggregations": aggs,
            },
            "SELECT epoch_ms(time_bucket(INTERVAL 1 DAY, __time)) d, country, count(*), sum(added), "
            "max(score) "
            f"FROM read_parquet([{files}]) GROUP BY d, country ORDER BY d, country",
        ),
        "groupBy page (high card)": (
            {
                "queryType": "groupBy",
                "dataSource": "bench",
                "intervals": [iv],
                "granularity": "all",
                "dimensions": ["page"],
                "aggregations": aggs,
            },
            f"SELECT page, count(*), sum(added), max(score) FROM read_parquet([{files}]) "
            "GROUP BY page ORDER BY page",
        ),
        "timeseries HLL users": (
            {
                "queryType": "timeseries",
                "dataSource": "bench",
                "intervals": [iv],
                "granularity": "all",
                "aggregations": [{"type": "HLLSketchBuild", "name": "u", "fieldName": "page"}],
            },
            f"SELECT approx_count_distinct(page) FROM read_parquet([{files}])",
        ),
    }
    print(f"{ROWS} rows in {len(inputs)} segment files")
    for name, (native, sql) in cases.items():
        q = parse_query(native)
        ours = median_seconds(functools.partial(run_to_json, q, inputs))
        plain = median_seconds(functools.partial(lambda text: conn.execute(text).fetchall(), sql))
        print(
            f"{name:28s} strata {ours * 1000:8.1f} ms   duckdb {plain * 1000:8.1f} ms"
            f"   ratio {ours / plain:5.2f}"
        )


if __name__ == "__main__":
    main()
