"""A Spark task reading published segments' Parquet files straight from deep storage.

A full read asks for every row of whole segments. A historical answers that by reading its copy of
each segment file with Arrow (`strata.engine.whole_scan`) and sending the batches as an Arrow
stream, which the task then decodes: the node's CPU, the transfer and the decoding all come on top
of the file read. Where the task can open the segment's own file in deep storage, it runs that very
whole scan there instead: the same batches, in the same types, from the same bytes (a segment file
never changes once published, and the historical's copy was checked against its SHA-256).

Only the metadata store says where a segment's file lies (its `loadSpec`; the broker keeps no
paths, so it can hold 100,000 segments), so the driver reads it there when the caller names the
store (option `metadata`), as Druid's own Spark reader reads segments. Which segments a read covers
is still the broker's timeline; a file is used only for a segment a historical serves (published
and immutable: a realtime node's rows change while it runs and have no file yet) and whose file the
task can read. Whatever the whole scan does not answer as stored (a pushed filter, a segment read
in part, a column in a type it leaves to DuckDB) goes to the data nodes or the broker as before.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from strata.spark.broker_client import StrataError
from timeline import Interval, SegmentDescriptor

if TYPE_CHECKING:  # imported where used: the planner never needs the engine (DuckDB and all)
    from strata.engine.segment_input import SegmentInput
    from strata.query import Query

SegmentKey = tuple[str, str, int]  # Druid's (itvl, ver, part) of a whole segment


def published_files(metadata: str, data_source: str) -> dict[SegmentKey, str]:
    """The file of each used segment of `data_source` held in local (or mounted) deep storage."""
    from strata.storage import open_metadata_store
    from strata.storage.metadata_store import MetadataStoreError

    if "://" not in metadata and not Path(metadata).is_file():
        raise StrataError(f"option metadata: no metadata store at {metadata}")
    try:
        store = open_metadata_store(metadata)
        try:
            used = store.used_segments(data_source)
        finally:
            store.close()
    except (MetadataStoreError, OSError) as e:
        raise StrataError(f"option metadata: cannot read the metadata store: {e}") from None
    return {
        (str(s.interval), s.version, s.partition_num): str(s.load_spec["path"])
        for s in used
        if s.load_spec.get("type", "local") == "local" and s.load_spec.get("path")
    }


def _whole_scan(
    query: Query, descriptor: Mapping[str, Any], path: str
) -> tuple[SegmentInput, pa.Schema] | None:
    from strata.engine.segment_input import SegmentInput
    from strata.engine.whole_scan import whole_scan_schema

    if not os.access(path, os.R_OK):
        return None
    window = Interval.parse(descriptor["itvl"])
    inp = SegmentInput(path, SegmentDescriptor.from_json(descriptor), path, window)
    try:
        schema = whole_scan_schema(query, [inp])
    except (OSError, pa.ArrowException, ValueError):
        return None  # unreadable here: the data node's copy answers
    return None if schema is None else (inp, schema)


def split_by_file(
    scan: Mapping[str, Any], segments: Sequence[Mapping[str, Any]], files: Sequence[str | None]
) -> tuple[list[tuple[SegmentInput, pa.Schema]], list[int]]:
    """The segments this task reads from their files (each with its whole scan's schema), and the
    indexes of those it asks of the data nodes or the broker."""
    from strata.query.base import parse_query

    query = parse_query(dict(scan))
    direct: list[tuple[SegmentInput, pa.Schema]] = []
    rest: list[int] = []
    for i, (descriptor, path) in enumerate(zip(segments, files, strict=True)):
        found = None if path is None else _whole_scan(query, descriptor, path)
        if found is None:
            rest.append(i)
        else:
            direct.append(found)
    return direct, rest


def read_files(direct: Sequence[tuple[SegmentInput, pa.Schema]], batch_rows: int) -> Iterator[pa.RecordBatch]:
    """Every row of each file, as the historical's whole scan gives it (`__time` epoch ms)."""
    from strata.engine.whole_scan import whole_scan_batches

    for inp, schema in direct:
        try:
            yield from whole_scan_batches(schema, [inp], batch_rows)
        except (OSError, pa.ArrowException) as e:  # Spark runs the task again
            raise StrataError(f"cannot read segment file {inp.path}: {e}") from None
