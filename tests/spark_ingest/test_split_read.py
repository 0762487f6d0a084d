"""Reading Parquet splits (runs of row groups) gives back every row of the input once, in input
order, each with its row number in its file: uneven row groups, a file of one row group, many small
files (no Spark needed; DuckDB reads the files as the oracle)."""

from __future__ import annotations

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import strata.ingestion.splits as splits
from strata.ingestion.readers import InputFile
from strata.ingestion.spec import InputFormat


def _write(path, first: int, groups: list[int]) -> InputFile:
    """A file of `sum(groups)` rows numbered from `first`, one row group per entry of `groups`."""
    with pq.ParquetWriter(path, pa.schema([("n", pa.int64()), ("s", pa.string())])) as w:
        n = first
        for size in groups:
            w.write_table(pa.table({"n": range(n, n + size), "s": [f"v{i}" for i in range(n, n + size)]}))
            n += size
    assert [pq.ParquetFile(path).metadata.row_group(g).num_rows for g in range(len(groups))] == groups
    return InputFile(str(path), path)


@pytest.mark.parametrize(
    "layout",
    [
        [[1, 7, 300, 2, 1000, 5, 64]],  # uneven row groups
        [[2500]],  # one row group
        [[3], [1, 1], [40], [5, 90, 2], [7], [1], [64, 64]],  # many small files
    ],
)
@pytest.mark.parametrize("split_rows", [1, 50, 100_000])
def test_splits_read_every_row_once_in_order(tmp_path, monkeypatch, layout, split_rows):
    monkeypatch.setattr(splits, "PARQUET_BATCH_ROWS", 64)  # blocks smaller than some row groups
    files, first = [], 0
    for i, groups in enumerate(layout):
        files.append(_write(tmp_path / f"part-{i:02}.parquet", first, groups))
        first += sum(groups)
    found = splits.split_inputs(files, InputFormat("parquet"), split_rows=split_rows)
    got = []
    for split in found:
        for block in splits.read_split(split, InputFormat("parquet")):
            ns, ss = block.table.column("n").to_pylist(), block.table.column("s").to_pylist()
            got += [
                (block.source, block.first_line + k, n, s)
                for k, (n, s) in enumerate(zip(ns, ss, strict=True))
            ]
    names = ", ".join(f"'{f.path}'" for f in files)
    expected = duckdb.sql(
        f"SELECT filename, file_row_number + 1, n, s FROM read_parquet([{names}], filename = true,"
        " file_row_number = true) ORDER BY filename, file_row_number"
    ).fetchall()
    assert got == expected
