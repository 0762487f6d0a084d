"""A segment written piece by piece (one row group at a time) is the same file as written whole."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from strata.storage.segment_file import (
    ROW_GROUP_ROWS,
    read_segment_facts,
    write_segment_file,
    write_segment_pieces,
)


def _table(n: int) -> pa.Table:
    rnd = np.random.default_rng(7)
    return pa.table({
        "__time": pa.array(np.sort(rnd.integers(0, 10**9, n)), pa.timestamp("ms", tz="UTC")),
        "page": pa.array([f"p{v}" for v in rnd.integers(0, 5000, n)]),
        "added": pa.array(rnd.integers(-50, 50, n)),
    })  # fmt: skip


def test_row_group_pieces_give_the_same_bytes(tmp_path: Path) -> None:
    table = _table(2 * ROW_GROUP_ROWS + 1234)
    facts = {"dataSource": "t", "numRows": table.num_rows}
    whole, pieced = tmp_path / "whole.parquet", tmp_path / "pieced.parquet"
    write_segment_file(table, whole, facts)
    pieces = (table.slice(lo, ROW_GROUP_ROWS) for lo in range(0, table.num_rows, ROW_GROUP_ROWS))
    size = write_segment_pieces(table.schema, pieces, pieced, facts)
    assert size == pieced.stat().st_size
    assert whole.read_bytes() == pieced.read_bytes()
    assert pq.ParquetFile(pieced).metadata.num_row_groups == 3
    assert read_segment_facts(pieced) == facts


def test_any_pieces_keep_rows_in_order(tmp_path: Path) -> None:
    table = _table(1000)
    path = tmp_path / "s.parquet"
    write_segment_pieces(table.schema, [table.slice(0, 10), table.slice(10, 600), table.slice(610)], path, {})
    assert pq.read_table(path).equals(table.replace_schema_metadata({b"strata": b"{}"}))
