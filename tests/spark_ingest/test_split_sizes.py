"""Input splits sized for the task slots: fewer, larger splits for a large input, a whole number per
slot, every row in exactly one split, in input order (no Spark needed)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import strata.ingestion.splits as splits
from strata.ingestion.readers import InputFile
from strata.ingestion.spec import InputFormat


def _parquet(tmp_path, rows: int, group: int):
    path = tmp_path / "in.parquet"
    pq.write_table(pa.table({"n": pa.array(range(rows), pa.int64())}), path, row_group_size=group)
    return InputFile(str(path), path)


def _rows_of(found, path) -> list[int]:
    out: list[int] = []
    for s in found:
        lo, hi = s.row_groups
        table = pq.ParquetFile(path).read_row_groups(range(lo, hi))
        assert s.first_row == len(out)  # the rows before it, as counted from the file
        out += table.column("n").to_pylist()
    return out


@pytest.mark.parametrize("slots, expected", [(0, 40), (1, 5), (2, 6), (4, 8), (3, 6)])
def test_parquet_splits_sized_for_slots(tmp_path, monkeypatch, slots, expected):
    monkeypatch.setattr(splits, "SPLIT_ROWS", 1000)
    monkeypatch.setattr(splits, "MAX_GROWTH", 8)
    f = _parquet(tmp_path, 40_000, 100)
    found = splits.split_inputs([f], InputFormat("parquet"), slots=slots)
    # without slots: 1,000 rows each; with them: at most 8,000 rows each, a multiple of the slots
    # and at least two per slot (40,000 rows / 8,000 = 5 -> rounded up to the slots)
    assert len(found) == expected
    assert _rows_of(found, f.path) == list(range(40_000))
    groups = [s.row_groups for s in found]
    assert all(g is not None for g in groups)
    sizes = [g[1] - g[0] for g in groups if g is not None]
    assert len(set(sizes[:-1])) == 1 and sizes[-1] <= sizes[0]  # equal runs of row groups


def test_small_input_keeps_base_size(tmp_path, monkeypatch):
    monkeypatch.setattr(splits, "SPLIT_ROWS", 1000)
    f = _parquet(tmp_path, 3_500, 100)
    found = splits.split_inputs([f], InputFormat("parquet"), slots=2)
    assert [s.row_groups for s in found] == [(0, 10), (10, 20), (20, 30), (30, 35)]


def test_text_splits_sized_for_slots(tmp_path, monkeypatch):
    monkeypatch.setattr(splits, "SPLIT_BYTES", 1000)
    path = tmp_path / "in.json"
    lines = [f'{{"n": {i}}}\n' for i in range(5000)]
    path.write_text("".join(lines))
    f = InputFile(str(path), path)
    found = splits.split_inputs([f], InputFormat("json"), slots=2)
    assert 4 <= len(found) <= 10  # base size would give ~50
    data = path.read_bytes()
    ranges = [s.byte_range for s in found]
    assert all(r is not None for r in ranges)
    spans = [r for r in ranges if r is not None]
    assert b"".join(data[lo:hi] for lo, hi in spans) == data
    assert all(data[hi - 1 : hi] == b"\n" for _, hi in spans)


@pytest.mark.parametrize("chunk", [4096, 1 << 20])
@pytest.mark.parametrize(("fmt", "tail"), [("json", "\n"), ("json", ""), ("csv", "\n"), ("csv", "")])
def test_a_range_reader_counts_the_ranges_lines(tmp_path, monkeypatch, fmt, tail, chunk):
    """The last block of a byte range ends past the range's lines (what the driver adds to later
    ranges' line numbers), read in several chunks, with blank lines, a CSV header and a file that
    may not end in a newline; the oracle counts newlines in the range's bytes."""
    import strata.ingestion.readers as readers

    if fmt == "json":
        lines = [f'{{"n": {i}, "s": "{"x" * (i % 37)}"}}' for i in range(3000)]
    else:
        lines = ["n,s"] + [f"{i},{'x' * (i % 37)}" for i in range(3000)]
    lines[700] = lines[1900] = ""
    path = tmp_path / f"in.{fmt}"
    data = ("\n".join(lines) + tail).encode()
    path.write_bytes(data)
    monkeypatch.setattr(readers, "CHUNK_BYTES", chunk)
    fmt_spec = InputFormat(fmt, find_columns_from_header=True) if fmt == "csv" else InputFormat(fmt)
    found = splits.split_inputs([InputFile(str(path), path)], fmt_spec, split_bytes=20_000)
    assert len(found) > 3
    for s in found:
        assert s.byte_range is not None
        lo, hi = s.byte_range
        blocks = list(splits.read_split(s, fmt_spec))
        assert len(blocks) > 1 or chunk > hi - lo
        assert blocks[-1].end_line - 1 == data[lo:hi].count(b"\n")
