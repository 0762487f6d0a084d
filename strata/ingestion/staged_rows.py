"""Prepared rows staged on disk by time chunk, so no engine holds a whole input in memory.

Every engine reads its input block by block and writes each prepared block (`ingestion.prepare`)
as one Arrow IPC file, its rows grouped by time chunk (a `Piece` per chunk). Segments are then
built one whole time chunk at a time from that chunk's pieces, in input order: the local engine
chunk after chunk, a Spark build task over the chunks it was given. Memory holds a block while
reading and the chunks being built while building, never the whole input; the staging area holds
the prepared rows, uncompressed, until the publish.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from strata.ingestion.normalize import TIME
from strata.ingestion.rollup import CHUNK
from strata.ingestion.segment_columns import staged_type
from strata.ingestion.spec import DimensionSpec


@dataclass(frozen=True)
class Piece:
    """The rows of one time chunk from one block of one input part: record batches of an IPC file.

    `split` and `block` number the input part (a Spark split, a local input file) and the block in
    it, so sorting pieces by them restores input order.
    """

    chunk: int
    split: int
    block: int
    path: str
    batches: tuple[int, ...]
    rows: int
    nbytes: int = 0  # the rows' Arrow buffers, as the build will hold them


def write_pieces(table: pa.Table, path: Path, split: int, block: int) -> list[Piece]:
    """`table` grouped by chunk into one IPC file; a `Piece` per chunk. No copy when the rows come
    in chunk order already, as time-ordered logs do; otherwise the copy orders them by chunk, then
    `__time` (stable, see `stage_order`)."""
    chunks = table.column(CHUNK).to_numpy()
    if bool((chunks[1:] >= chunks[:-1]).all()):  # time-ordered input: already in chunk order
        ordered, sorted_chunks = table, chunks
    else:
        order = stage_order(chunks, table.column(TIME).to_numpy())
        ordered, sorted_chunks = table.take(pa.array(order)), chunks[order]
    edges = np.flatnonzero(np.diff(sorted_chunks)) + 1
    pieces: list[Piece] = []
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, ordered.schema) as writer:
        written = 0
        for lo, hi in zip(np.r_[0, edges].tolist(), np.r_[edges, chunks.size].tolist(), strict=True):
            rows = ordered.slice(lo, hi - lo)
            batches = rows.to_batches()
            for batch in batches:
                writer.write_batch(batch)
            ids = tuple(range(written, written + len(batches)))
            written += len(batches)
            pieces.append(Piece(int(sorted_chunks[lo]), split, block, str(path), ids, hi - lo, rows.nbytes))
    return pieces


def stage_order(chunks: np.ndarray, times: np.ndarray) -> np.ndarray:
    """Rows by chunk, then `__time`, ties in input order: the segment's own order but for the
    dimensions. A build gathers each segment's rows in segment order, so with its pieces in time
    order it reads each piece front to back instead of all over (10M Parquet rows on 2 cores: the
    build's writes took 12% and its sort 15% less CPU than with pieces in input order), and the
    final stable sort keeps rows that tie on every key in input order, as before."""
    order = np.argsort(times, kind="stable")
    ordered = chunks[order]
    if bool((ordered[1:] >= ordered[:-1]).all()):  # the usual case: chunks grow with `__time`
        return order
    return np.lexsort((times, chunks))


def read_pieces(pieces: Sequence[Piece], dims: Sequence[DimensionSpec]) -> list[pa.Table]:
    """The pieces' rows in input order, each table with every dimension (see `conform`).

    The files are memory-mapped, so nothing is copied until the build gathers its rows; the maps
    go with the returned tables, so a caller that drops them after its build leaves no file
    pages mapped.
    """
    readers: dict[str, pa.ipc.RecordBatchFileReader] = {}
    parts = []
    for p in sorted(pieces, key=lambda p: (p.split, p.block, p.chunk)):
        if p.path not in readers:
            readers[p.path] = pa.ipc.open_file(pa.memory_map(p.path))
        batches = [readers[p.path].get_batch(i) for i in p.batches]
        parts.append(conform(pa.Table.from_batches(batches), dims))
    return parts


def conform(table: pa.Table, dims: Sequence[DimensionSpec]) -> pa.Table:
    """Add the dimensions later blocks discovered (null here, as concatenating the blocks would
    fill them), every part's columns in one order."""
    for d in dims:
        if d.name not in table.column_names:
            table = table.append_column(d.name, pa.nulls(table.num_rows, staged_type(d)))
    first = [TIME, *(d.name for d in dims)]
    return table.select(first + [c for c in table.column_names if c not in set(first)])
