"""A scan of whole segments with nothing to compute, read straight from the segment files.

A Spark task reading a table asks a data node for every row of exactly its segments: named
columns, no filter, no virtual columns, no order, no limit, no per-row segment id. Every row of
each file is then answered as stored, so the node reads the files' record batches with Arrow
instead of planning a DuckDB scan over them (a third less CPU, and no second copy of each
column); `__time` becomes epoch milliseconds, as the DuckDB scan gives it. Anything else (a
segment read in part, a live segment, a column missing or typed differently in some segment) is
left to the DuckDB scan, so the answer is the same either way.

A string column whose pages are all dictionary-encoded (a segment's low-cardinality dimensions) is
read as Arrow dictionary indices and expanded with one `take` per batch, a fifth less CPU for a
whole read than Parquet's own expansion value by value; a column whose writer fell back to plain
pages (a dictionary past its size limit) is read as plain strings, since reading it as a
dictionary would hash every value to build one. The batches are the same either way.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from strata.engine.footer import read_footer
from strata.engine.memory_source import is_memory
from strata.engine.segment_input import SegmentInput, read_schema, reads_whole
from strata.query import Query
from strata.query.columns import TIME_COLUMN
from strata.query.scan import ScanQuery

# Arrow types the DuckDB scan returns unchanged (its VARCHAR is `string`, so large strings,
# dictionaries and narrower integers are left to it)
_AS_STORED = (pa.int64(), pa.float64(), pa.float32(), pa.string(), pa.bool_())
_TIME_STORED = (pa.timestamp("ms", tz="UTC"), pa.timestamp("ms"), pa.int64())
# A dictionary-encoded column chunk holds its dictionary page (pyarrow's writer falls back to plain
# pages once it reaches 1 MiB, checked every 1,024 values: up to 64 KiB past it for values under
# 60 bytes) and indices of at most 19 bits with definition levels, under 2.75 bytes a value: a
# chunk larger than that has plain pages too (a chunk just past it is read plain: no slower)
_DICTIONARY_PAGE_BYTES = (1 << 20) + (64 << 10) + (4 << 10)
_INDEX_QUARTER_BYTES_PER_VALUE = 11


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
    strings = [f.name for f in schema if f.type == pa.string()]
    for inp in inputs:
        meta = read_footer(inp.path).meta
        coded = dictionary_columns(meta, strings)
        with pq.ParquetFile(inp.path, metadata=meta, read_dictionary=coded) as stored:
            for batch in stored.iter_batches(batch_size=batch_rows, columns=names, use_threads=False):
                arrays = [_plain(batch.column(n)) for n in names]
                arrays[0] = arrays[0].view(pa.int64())  # epoch ms: the same 8 bytes
                yield pa.RecordBatch.from_arrays(arrays, schema=schema)


def _plain(column: pa.Array) -> pa.Array:
    """A dictionary column's values (one `take`), anything else as it is."""
    return column.dictionary_decode() if isinstance(column, pa.DictionaryArray) else column


def dictionary_columns(meta: pq.FileMetaData, names: Sequence[str]) -> list[str]:
    """The `names` whose column chunks are dictionary-encoded throughout (no plain fallback pages),
    judged from the footer: each chunk has a dictionary page and no more bytes than its
    dictionary and indices can take."""
    if not names or meta.num_row_groups == 0:
        return []
    positions = {meta.schema.column(i).path: i for i in range(meta.num_columns)}
    coded = []
    for name in names:
        index = positions.get(name)
        if index is None:
            continue
        chunks = [meta.row_group(g).column(index) for g in range(meta.num_row_groups)]
        if all(
            c.has_dictionary_page
            and 4 * c.total_uncompressed_size
            <= 4 * _DICTIONARY_PAGE_BYTES + _INDEX_QUARTER_BYTES_PER_VALUE * c.num_values
            for c in chunks
        ):
            coded.append(name)
    return coded
