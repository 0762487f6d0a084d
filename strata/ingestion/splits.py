"""Input splits: pieces of the input that parallel tasks read side by side, in input order.

- Parquet: runs of row groups of about `SPLIT_ROWS` rows (row numbers stay exact: the rows
  before a split are known from the footer).
- Uncompressed text (json, csv, tsv): byte ranges of about `SPLIT_BYTES`, cut just after a
  newline. A range's lines are numbered from 1; its reader counts them (`Block.end_line`) and the
  driver adds the lines of the ranges before it to every reported line number.
- Compressed text and inline data: whole (a compressed stream cannot be entered in the middle).

Given the task slots that will read them (`slots`), splits grow past those base sizes (up to
`MAX_GROWTH` times) so that a large input makes about `SPLITS_PER_SLOT` splits per slot, a multiple
of the slots: each Spark task costs tens of milliseconds of CPU whatever it reads (scheduling,
the Python worker's set-up, its result), and a whole number of rounds per slot keeps the slots
equally busy. Small inputs keep the base sizes.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from itertools import pairwise
from math import ceil
from typing import TYPE_CHECKING

import pyarrow as pa

from strata.ingestion.block import Block
from strata.ingestion.errors import IngestionError
from strata.ingestion.readers import PARQUET_BATCH_ROWS, InputFile, kept_rows, read_blocks
from strata.ingestion.spec import InputFormat

if TYPE_CHECKING:
    import pyarrow.parquet as pq

SPLIT_ROWS = 1 << 18
SPLIT_BYTES = 32 << 20
SPLITS_PER_SLOT = 2
MAX_GROWTH = 8  # a split holds at most this many base sizes (~2M rows, 256 MiB of text)
_COMPRESSED = (".gz", ".bz2", ".xz")


@dataclass(frozen=True)
class InputSplit:
    """A whole input, a run of Parquet row groups `[first, end)`, or a byte range of a text file."""

    file: InputFile
    row_groups: tuple[int, int] | None = None
    first_row: int = 0  # Parquet: rows before this split in its file
    byte_range: tuple[int, int] | None = None


def split_inputs(
    files: list[InputFile],
    fmt: InputFormat,
    split_rows: int | None = None,
    split_bytes: int | None = None,
    slots: int = 0,
) -> list[InputSplit]:
    """The splits of `files`, in input order; `slots` > 0 sizes them for that many parallel tasks."""
    if fmt.type == "parquet":
        metas = [_parquet_meta(f) for f in files]
        rows = split_size(sum(m.num_rows for m in metas), split_rows or SPLIT_ROWS, slots)
        return [s for f, m in zip(files, metas, strict=True) for s in _parquet_splits(f, m, rows)]
    ranged = [f.path is not None and not f.path.name.lower().endswith(_COMPRESSED) for f in files]
    text_bytes = sum(f.size for f, r in zip(files, ranged, strict=True) if r)
    size = split_size(text_bytes, split_bytes or SPLIT_BYTES, slots)
    out: list[InputSplit] = []
    for f, r in zip(files, ranged, strict=True):
        out += _text_splits(f, size) if r else [InputSplit(f)]
    return out


def split_size(total: int, base: int, slots: int) -> int:
    """Rows (or bytes) per split: `base`, or more so that `total` makes about `SPLITS_PER_SLOT`
    splits per slot (at most `MAX_GROWTH` x `base` each), their count a multiple of `slots`."""
    if slots <= 0 or total <= base * slots * SPLITS_PER_SLOT:
        return base
    count = max(slots * SPLITS_PER_SLOT, ceil(total / (base * MAX_GROWTH)))
    count = ceil(count / slots) * slots
    return max(base, ceil(total / count))


def _parquet_meta(f: InputFile) -> pq.FileMetaData:
    import pyarrow.parquet as pq

    if f.path is None:
        raise IngestionError("parquet input needs files, not inline data")
    try:
        return pq.ParquetFile(f.path).metadata
    except (pa.ArrowInvalid, OSError) as e:
        raise IngestionError(f"{f.name}: not a readable Parquet file: {e}") from None


def _parquet_splits(f: InputFile, meta: pq.FileMetaData, split_rows: int) -> list[InputSplit]:
    out: list[InputSplit] = []
    first = rows = before = 0
    for g in range(meta.num_row_groups):
        rows += meta.row_group(g).num_rows
        if rows >= split_rows or g == meta.num_row_groups - 1:
            out.append(InputSplit(f, (first, g + 1), before))
            first, before, rows = g + 1, before + rows, 0
    return out or [InputSplit(f)]


def _text_splits(f: InputFile, split_bytes: int) -> list[InputSplit]:
    """Ranges of about `split_bytes`, each ending just after a newline (or at the end of the file)."""
    assert f.path is not None
    size = f.size
    if size <= split_bytes:
        return [InputSplit(f)]
    cuts = [0]
    with open(f.path, "rb") as raw:
        while cuts[-1] + split_bytes < size:
            raw.seek(cuts[-1] + split_bytes)
            while True:
                piece = raw.read(1 << 16)
                nl = piece.find(b"\n")
                if not piece or nl != -1:
                    break
            cut = raw.tell() - len(piece) + nl + 1 if piece and nl != -1 else size
            if cut >= size:
                break
            cuts.append(cut)
    cuts.append(size)
    return [InputSplit(f, byte_range=(lo, hi)) for lo, hi in pairwise(cuts)]


def read_split(split: InputSplit, fmt: InputFormat) -> Iterator[Block]:
    if split.row_groups is None:
        yield from read_blocks(split.file, fmt, split.byte_range)
        return
    import pyarrow.parquet as pq

    assert split.file.path is not None
    lo, hi = split.row_groups
    try:
        table = pq.ParquetFile(split.file.path).read_row_groups(range(lo, hi))
    except (pa.ArrowInvalid, OSError) as e:
        raise IngestionError(f"{split.file.name}: not a readable Parquet file: {e}") from None
    for row in range(0, table.num_rows, PARQUET_BATCH_ROWS):
        part = table.slice(row, PARQUET_BATCH_ROWS)
        yield Block(kept_rows(part, split.file.keep), split.file.name, split.first_row + row + 1)
