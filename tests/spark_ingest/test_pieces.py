"""Both engines stage a block's rows grouped by time chunk. A block that arrives in
chunk order (time-ordered logs) is written as is; otherwise each chunk's rows come by `__time`,
rows of equal time in input order (the build's final stable sort then gives the same segments)."""

from __future__ import annotations

from itertools import pairwise

import pyarrow as pa
import pytest

from strata.ingestion.normalize import TIME
from strata.ingestion.rollup import CHUNK
from strata.ingestion.staged_rows import write_pieces


def _staged(tmp_path, chunks: list[int], times: list[int]) -> dict[int, list[int]]:
    table = pa.table(
        {
            TIME: pa.array(times, pa.int64()),
            "n": list(range(len(chunks))),
            CHUNK: pa.array(chunks, pa.int64()),
        }
    )
    path = tmp_path / "block.arrow"
    pieces = write_pieces(table, path, split=2, block=1)
    reader = pa.ipc.open_file(pa.memory_map(str(path)))
    got = {
        p.chunk: [n for i in p.batches for n in reader.get_batch(i).column("n").to_pylist()] for p in pieces
    }
    assert [p.chunk for p in pieces] == sorted(got)
    assert {(p.split, p.block, p.rows) for p in pieces} == {(2, 1, len(v)) for v in got.values()}
    return got


@pytest.mark.parametrize(
    ("chunks", "times"),
    [
        ([5, 0, 9, 5, 0, 5], [57, 3, 90, 51, 3, 51]),  # ties in time keep input order
        ([0, 0, 5, 5, 5, 9], [1, 2, 50, 51, 52, 90]),  # time-ordered
        ([0, 0, 5, 5, 5, 9], [2, 1, 52, 50, 51, 90]),  # chunk-ordered only: written as is
        ([3, 3, 3, 3, 3, 3], [9, 8, 7, 6, 5, 4]),
        # a query granularity coarser than the chunks: `__time` alone does not order the chunks
        ([7, 6, 6, 7, 6], [0, 0, 0, 0, 0]),
        ([7, 6, 8, 7, 6], [1, 0, 1, 0, 1]),
    ],
)
def test_pieces_hold_each_chunks_rows(tmp_path, chunks, times):
    got = _staged(tmp_path, chunks, times)
    expected: dict[int, list[int]] = {}
    chunk_ordered = all(a <= b for a, b in pairwise(chunks))
    key = (lambda n: n) if chunk_ordered else (lambda n: (times[n], n))
    for n in sorted(range(len(chunks)), key=key):
        expected.setdefault(chunks[n], []).append(n)
    assert got == expected
