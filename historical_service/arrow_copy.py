"""The uncompressed Arrow copy of a cached segment that queries read memory-mapped.

Deep storage holds Parquet (small, slow to decode); like Druid's segment cache, a historical
keeps each loaded segment in a form it can map and scan without decoding: `index.arrow` beside
`index.parquet`, an Arrow IPC file with string columns dictionary-encoded (one dictionary per
column, which DuckDB groups and filters on faster than plain strings) in batches of DuckDB's row
group size. It is written once, at load time, to a temporary name and renamed into place, so a
copy in its final place is whole; on restart it is reused when its schema and row count match
the Parquet file, else written again. The page cache holds the mapped rows, not the heap.
"""

from __future__ import annotations

import logging
import uuid
from pathlib import Path

import pyarrow as pa
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
        table = pq.read_table(parquet, read_dictionary=strings).unify_dictionaries()
        with pa.OSFile(str(temporary), "wb") as sink, pa.ipc.new_file(sink, schema) as writer:
            writer.write_table(table.cast(schema), max_chunksize=BATCH_ROWS)
        temporary.rename(target)
    finally:
        temporary.unlink(missing_ok=True)
    return _open(target, schema, meta.num_rows)


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
