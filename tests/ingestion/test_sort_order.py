"""Segment row order: chunk, `__time`, then dimensions, nulls first, ties kept in input order.

Oracle: Python's stable `sorted` over the raw rows. Covers the shortcut that sorts without the
chunk key when chunks grow with time, and the fallback when they do not.
"""

from __future__ import annotations

import random
from typing import Any

import pyarrow as pa
import pytest

from strata.ingestion.normalize import TIME
from strata.ingestion.rollup import CHUNK, build_segment_rows, segment_order, segment_rows
from strata.ingestion.spec import DimensionSpec

DIMS = [DimensionSpec("d", "string"), DimensionSpec("n", "long")]


def _rows(chunk_of: Any, seed: int) -> pa.Table:
    rnd = random.Random(seed)
    times = [rnd.randrange(0, 10) for _ in range(400)]
    return pa.table({
        CHUNK: pa.array([chunk_of(t) for t in times], pa.int64()),
        TIME: pa.array(times, pa.int64()),
        "d": pa.array([rnd.choice([None, "a", "b", "ab"]) for _ in times], pa.string()),
        "n": pa.array([rnd.choice([None, -1, 0, 7]) for _ in times], pa.int64()),
    })  # fmt: skip


def _oracle(table: pa.Table) -> list[int]:
    cols = [table.column(k).to_pylist() for k in (CHUNK, TIME, "d", "n")]

    def key(i: int) -> tuple[tuple[Any, ...], ...]:
        return tuple((0,) if c[i] is None else (1, c[i]) for c in cols)

    return sorted(range(table.num_rows), key=key)


@pytest.mark.parametrize(
    "chunk_of",
    [lambda t: t // 3 * 3, lambda t: (t * 7) % 5],  # grows with time / does not
    ids=["monotone", "not-monotone"],
)
@pytest.mark.parametrize("seed", [1, 2])
def test_order_matches_stable_python_sort(chunk_of: Any, seed: int) -> None:
    table = _rows(chunk_of, seed)
    rows = segment_rows(table, DIMS, [], rollup=False)
    order = segment_order(rows, DIMS)
    assert order.to_pylist() == _oracle(table)
    assert build_segment_rows(table, DIMS, [], rollup=False).equals(table.take(order))
    # sorting reads chunked columns: same order as from one contiguous array per column
    chunked = pa.concat_tables([rows.slice(0, 150), rows.slice(150, 100), rows.slice(250)])
    assert segment_order(chunked, DIMS).equals(order)
