"""One block of raw input -> rows ready for segment building: typed, in their time chunk, truncated.

Shared by every engine (the local process reading block after block, a Spark task reading one
input split, a Spark writer task given DataFrame batches), so they all drop, report and bucket
rows the same way.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from strata.ingestion.block import Block
from strata.ingestion.errors import InsertTimeOutOfBounds, ParseProblem
from strata.ingestion.flatten import flatten_table
from strata.ingestion.normalize import TIME, discover_dimensions, normalize_block
from strata.ingestion.rollup import CHUNK
from strata.ingestion.spec import DimensionSpec, IngestionSpec
from timeline import Interval


@dataclass
class PreparedBlock:
    """Rows with `__chunk` (time-chunk start) and `__time` truncated to the query granularity."""

    table: pa.Table
    dimensions: list[DimensionSpec]  # the dimensions known after this block (grows when schemaless)
    rows_read: int = 0
    parse_errors: int = 0
    thrown_away: int = 0
    problems: list[ParseProblem] = field(default_factory=list)  # sorted by line, at most a few


def allowed_chunks(spec: IngestionSpec) -> np.ndarray | None:
    """Chunk starts inside `granularitySpec.intervals`, or None when every chunk is wanted."""
    if not spec.granularity.intervals:
        return None
    seg_gran = spec.granularity.segment
    starts = {b.start for iv in spec.granularity.intervals for b in seg_gran.buckets(iv)}
    return np.fromiter(starts, np.int64, len(starts))


def prepare_block(
    block: Block, spec: IngestionSpec, dims: Sequence[DimensionSpec], allowed: np.ndarray | None
) -> PreparedBlock:
    dims = list(dims)
    if spec.input_format.flatten is not None:
        block = dataclasses.replace(block, table=flatten_table(block.table, spec.input_format.flatten))
    read = block.table.num_rows + len(block.problems)
    if spec.row_stage is not None:  # its WHERE drops rows: thrown away, as a transformSpec filter's
        block = spec.row_stage.apply(block)
    if spec.dimensions.discover:
        dims = discover_dimensions(block.table, spec, dims)
    norm = normalize_block(block, spec, dims)
    out = PreparedBlock(norm.table, dims, read)
    out.thrown_away = read - block.table.num_rows - len(block.problems)
    out.problems = sorted(block.problems + norm.problems, key=lambda p: p.line)
    out.parse_errors = len(block.problems) + norm.bad_rows
    out.thrown_away += norm.filtered  # and the transformSpec's filter
    table = norm.table
    times = table.column(TIME).to_numpy()
    chunks = spec.granularity.segment.bucket_starts(times)
    if allowed is not None:
        keep = np.isin(chunks, allowed)
        if not keep.all():
            if spec.strict_time:
                raise _out_of_bounds(spec, int(chunks[~keep][0]))
            out.thrown_away += int((~keep).sum())
            table, times, chunks = table.filter(pa.array(keep)), times[keep], chunks[keep]
    table = table.set_column(0, TIME, pa.array(spec.granularity.query.bucket_starts(times), pa.int64()))
    out.table = table.append_column(CHUNK, pa.array(chunks, pa.int64()))
    return out


def _out_of_bounds(spec: IngestionSpec, chunk_start: int) -> InsertTimeOutOfBounds:
    chunk = Interval(chunk_start, spec.granularity.segment.bucket_end(chunk_start))
    return InsertTimeOutOfBounds(str(chunk), [str(iv) for iv in spec.granularity.intervals])
