"""A scan of whole segments with nothing to compute, read straight from the segment files.

A Spark task reading a table asks a data node for every row of exactly its segments: named
columns, no filter, no virtual columns, no order, no limit, no per-row segment id. Every row of
each file is then answered as stored, so the node reads the files' record batches with Arrow
instead of planning a DuckDB scan over them (a third less CPU, and no second copy of each
column); `__time` becomes epoch milliseconds, as the DuckDB scan gives it. Anything else (a
segment read in part, a live segment, a column missing or typed differently in some segment) is
left to the DuckDB scan, so the answer is the same either way.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from strata.engine.memory_source import is_memory
from strata.engine.segment_input import SegmentInput, read_schema, reads_whole
from strata.query import Query
from strata.query.columns import TIME_COLUMN
from strata.query.scan import ScanQuery

# Arrow types the DuckDB scan returns unchanged (its VARCHAR is `string`, so large strings,
# dictionaries and narrower integers are left to it)
_AS_STORED = (pa.int64(), pa.float64(), pa.float32(), pa.string(), pa.bool_())
_TIME_STORED = (pa.timestamp("ms", tz="UTC"), pa.timestamp("ms"), pa.int64())


def whole_scan_schema(query: Query, inputs: Sequence[SegmentInput]) -> pa.Schema | None:
    """The answer's schema when `query` reads every row of every input as stored, else None."""
    if not isinstance(query, ScanQuery) or not inputs or not query.columns:
        return None
    if query.filter is not None or query.virtual_columns or query.order != "none" or not query.plain_table:
        return None
    if query.limit is not None or query.offset or query.context.segment_labels:
        return None
    wanted = [c for c in query.columns if c != TIME_COLUMN]
    if len(set(wanted)) != len(wanted) or any(c.startswith("__") for c in wanted):
        return None
    if len({i.path for i in inputs}) != len(inputs):
        return None
    types: dict[str, pa.DataType] = {}
    for inp in inputs:
        if is_memory(inp.path) or not reads_whole(inp):
            return None
        columns = read_schema(inp.path).columns
        if columns.get(TIME_COLUMN) not in _TIME_STORED:
            return None
        for c in wanted:
            kind = columns.get(c)
            if kind not in _AS_STORED or types.setdefault(c, kind) != kind:
                return None
    return pa.schema([(TIME_COLUMN, pa.int64()), *((c, types[c]) for c in wanted)])


def whole_scan_batches(
    schema: pa.Schema, inputs: Sequence[SegmentInput], batch_rows: int
) -> Iterator[pa.RecordBatch]:
    """Every row of each input file in order, as batches of `schema` (`whole_scan_schema`)."""
    names = schema.names
    for inp in inputs:
        with pq.ParquetFile(inp.path) as stored:
            for batch in stored.iter_batches(batch_size=batch_rows, columns=names, use_threads=False):
                arrays = [batch.column(n) for n in names]
                arrays[0] = arrays[0].view(pa.int64())  # epoch ms: the same 8 bytes
                yield pa.RecordBatch.from_arrays(arrays, schema=schema)
