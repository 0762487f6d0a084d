"""Segments read by one multi-file scan whose files order, add or type their columns differently.

DuckDB maps a file's columns to the first file's by name; physical types that differ across the
files take `union_by_name`. The oracle is DuckDB SQL over the raw rows each segment was written from.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

from strata.engine import SegmentInput, run_to_json
from strata.query import parse_query
from tests.query.segment_fixtures import write_segments

START = 1_577_836_800_000  # 2020-01-01
HOUR = 3_600_000


def _segment(out: Path, hour: int, columns: dict[str, pa.Array]) -> tuple[pa.Table, SegmentInput]:
    n = len(next(iter(columns.values())))
    times = pa.array([START + hour * HOUR + 1000 * i for i in range(n)], pa.int64())
    table = pa.table({"__time": times.cast(pa.timestamp("ms", tz="UTC")), **columns})
    (inp,) = write_segments(table, out, "hour", data_source="t", dimensions=["b"])
    return table, inp


@pytest.mark.parametrize("narrow", [False, True], ids=["same types", "one file int32"])
def test_files_with_other_column_orders(tmp_path: Path, narrow: bool) -> None:
    first = pa.array([1, 2, 2**31 - 1], pa.int32() if narrow else pa.int64())
    parts = [
        _segment(tmp_path, 0, {"a": first, "b": pa.array(["x", "y", "x"])}),
        _segment(
            tmp_path,
            1,
            {"c": pa.array([0.5, 1.5]), "b": pa.array(["y", "z"]), "a": pa.array([10, 2**40], pa.int64())},
        ),
        _segment(tmp_path, 2, {"b": pa.array(["x", "x", "z", "y"]), "a": pa.array([7, 8, 9, -(2**50)])}),
    ]
    schema = pa.schema({"__time": pa.timestamp("ms", tz="UTC"), "a": pa.int64(), "b": pa.string()})
    raw = pa.concat_tables([t.select(schema.names).cast(schema) for t, _ in parts])
    inputs = [i for _, i in parts]
    q = {"queryType": "groupBy", "dataSource": "t", "intervals": ["2020-01-01/2020-01-02"],
         "granularity": "all", "dimensions": ["b"],
         "aggregations": [{"type": "count", "name": "rows"},
                          {"type": "longSum", "name": "a", "fieldName": "a"}]}  # fmt: skip
    got = sorted(
        (r["event"]["b"], r["event"]["rows"], r["event"]["a"]) for r in run_to_json(parse_query(q), inputs)
    )
    conn = duckdb.connect()
    conn.register("raw", raw)
    want = conn.execute("SELECT b, count(*), sum(a) FROM raw GROUP BY b ORDER BY b").fetchall()
    assert got == [(b, n, int(s)) for b, n, s in want]
