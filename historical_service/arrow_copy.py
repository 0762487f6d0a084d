"""The uncompressed Arrow copy of a cached segment that queries read memory-mapped.

Deep storage holds Parquet (small, slow to decode); like Druid's segment cache, a historical
keeps each loaded segment in a form it can map and scan without decoding: `index.arrow` beside
`index.parquet`, an Arrow IPC file with string columns dictionary-encoded (one sorted
dictionary per column, which DuckDB groups and filters on faster than plain strings) in batches
of DuckDB's row group size. It is written once, at load time, to a temporary name and renamed into place, so a
copy in its final place is whole; on restart it is reused when its schema and row count match
the Parquet file, else written again. The page cache holds the mapped rows, not the heap.
"""

from __future__ import annotations

import logging
import uuid
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from strata.engine.mapped_source import BATCH_ROWS

log = logging.getLogger(__name__)

ARROW_FILE = "index.arrow"


def arrow_path(parquet: Path) -> Path:
    return parquet.with_name(ARROW_FILE)


def mapped_copy(parquet: Path) -> pa.Table:
    """The rows of segment file `parquet`, memory-mapped from its Arrow copy (written if needed)."""
    meta = pq.read_metadata(parquet)
    schema = _copy_schema(meta.schema.to_arrow_schema())
    target = arrow_path(parquet)
    if target.is_file():
        try:
            return _open(target, schema, meta.num_rows)
        except (OSError, ValueError) as e:  # pyarrow's ArrowInvalid is a ValueError
            log.warning("Arrow copy %s is unusable (%s): writing it again", target, e)
    temporary = target.with_name(f".{ARROW_FILE}.{uuid.uuid4().hex}.tmp")
    try:
        strings = [f.name for f in schema if pa.types.is_dictionary(f.type)]
        table = _sorted_dictionaries(pq.read_table(parquet, read_dictionary=strings).unify_dictionaries())
        with pa.OSFile(str(temporary), "wb") as sink, pa.ipc.new_file(sink, schema) as writer:
            writer.write_table(table.cast(schema), max_chunksize=BATCH_ROWS)
        temporary.rename(target)
    finally:
        temporary.unlink(missing_ok=True)
    return _open(target, schema, meta.num_rows)


def _sorted_dictionaries(table: pa.Table) -> pa.Table:
    """Each dictionary column (one dictionary, after `unify_dictionaries`) with its dictionary in
    ascending order and its indices mapped to match, as Druid sorts a segment's dictionaries: copies
    holding the same values then have the same dictionary, so a request over them groups and
    filters on their codes as they are (`strata.engine.dictionary_codes.shared_codes`), not mapped
    row by row."""
    for position, field in enumerate(table.schema):
        column = table.column(position)
        if not pa.types.is_dictionary(field.type) or not column.num_chunks:
            continue
        values = column.chunk(0).dictionary
        order = pc.array_sort_indices(values).to_numpy()
        if bool(np.all(order == np.arange(len(order)))):
            continue
        rank = np.empty(len(order), np.int32)
        rank[order] = np.arange(len(order), dtype=np.int32)
        ranked, ascending = pa.array(rank), values.take(pa.array(order))
        chunks = [pa.DictionaryArray.from_arrays(ranked.take(c.indices), ascending) for c in column.chunks]
        table = table.set_column(position, field, pa.chunked_array(chunks, field.type))
    return table


def _copy_schema(schema: pa.Schema) -> pa.Schema:
    """The file's schema with top-level strings as dictionaries (footer metadata left out)."""
    fields = [
        f.with_type(pa.dictionary(pa.int32(), f.type))
        if pa.types.is_string(f.type) or pa.types.is_large_string(f.type)
        else f
        for f in schema
    ]
    return pa.schema(fields)


def _open(path: Path, schema: pa.Schema, num_rows: int) -> pa.Table:
    with pa.memory_map(str(path), "r") as source:
        table = pa.ipc.open_file(source).read_all()
    if not table.schema.equals(schema):
        raise ValueError(f"its schema differs from the segment file's: {table.schema} vs {schema}")
    if table.num_rows != num_rows:
        raise ValueError(f"it has {table.num_rows} rows, the segment file {num_rows}")
    return table


def remove_copy(parquet: Path) -> None:
    """Delete the Arrow copy beside `parquet`, if any (a node serving Parquet keeps none)."""
    arrow_path(parquet).unlink(missing_ok=True)
