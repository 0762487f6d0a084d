"""Stage 1 of the Spark engine writes a block's rows grouped by time chunk, each chunk's rows in
input order, whether the block arrives in chunk order (time-ordered logs: written as is) or not."""

from __future__ import annotations

import pyarrow as pa
import pytest

from ingestion.rollup import CHUNK
from ingestion.spark_engine import _write_pieces


@pytest.mark.parametrize("chunks", [[0, 0, 5, 5, 5, 9], [5, 0, 9, 5, 0, 5], [3, 3, 3, 3, 3, 3]])
def test_pieces_hold_each_chunks_rows_in_input_order(tmp_path, chunks):
    table = pa.table({"n": list(range(len(chunks))), CHUNK: pa.array(chunks, pa.int64())})
    path = tmp_path / "block.arrow"
    pieces = _write_pieces(table, path, split=2, block=1)
    reader = pa.ipc.open_file(pa.memory_map(str(path)))
    got = {
        p.chunk: [n for i in p.batches for n in reader.get_batch(i).column("n").to_pylist()] for p in pieces
    }
    expected: dict[int, list[int]] = {}
    for n, c in enumerate(chunks):
        expected.setdefault(c, []).append(n)
    assert got == expected
    assert [p.chunk for p in pieces] == sorted(expected)
    assert {(p.split, p.block, p.rows) for p in pieces} == {(2, 1, len(v)) for v in expected.values()}
