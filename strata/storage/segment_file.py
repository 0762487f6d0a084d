"""The segment file: one Parquet file per segment, its ingestion facts in the footer (`strata` key).

Strings are dictionary-encoded (low-cardinality dimensions shrink and scan fast), statistics are on
(the engine can skip row groups by `__time` and dimension ranges), and row groups are sized for
scanning rather than for point lookups.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

METADATA_KEY = b"strata"
TIME_COLUMN = "__time"
ROW_GROUP_ROWS = 128 * 1024
COMPRESSION = "zstd"


def write_segment_file(table: pa.Table, path: Path, facts: dict[str, Any]) -> int:
    """Write `table` (already sorted) with `facts` as the footer's `strata` JSON; returns the byte size."""
    return write_segment_pieces(table.schema, [table], path, facts)


def write_segment_pieces(
    schema: pa.Schema, pieces: Iterable[pa.Table], path: Path, facts: dict[str, Any]
) -> int:
    """Write the rows of `pieces`, in order, as one segment file; returns the byte size.

    Each piece starts a row group, so pieces of whole row groups (`ROW_GROUP_ROWS` rows, the last
    one shorter) give the same file as `write_segment_file`; a writer can then build each row group
    just before it is written instead of holding the whole segment in memory.
    """
    if schema.field(0).name != TIME_COLUMN:
        raise ValueError(f"a segment's first column must be {TIME_COLUMN}")
    meta = dict(schema.metadata or {})
    meta[METADATA_KEY] = orjson.dumps(facts)
    schema = schema.with_metadata(meta)
    strings = [f.name for f in schema if pa.types.is_string(f.type) or pa.types.is_large_string(f.type)]
    with pq.ParquetWriter(
        path,
        schema,
        compression=COMPRESSION,
        use_dictionary=strings,
        write_statistics=True,
        store_schema=True,
    ) as writer:
        for piece in pieces:
            writer.write_table(piece, row_group_size=ROW_GROUP_ROWS)
    return path.stat().st_size


def read_segment_facts(path: Path | str) -> dict[str, Any]:
    """The `strata` footer JSON of a segment file."""
    meta = pq.read_schema(path).metadata or {}
    if METADATA_KEY not in meta:
        raise ValueError(f"{path} is not a Strata segment file (no '{METADATA_KEY.decode()}' footer key)")
    facts: dict[str, Any] = orjson.loads(meta[METADATA_KEY])
    return facts
