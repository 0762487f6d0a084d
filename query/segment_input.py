"""The engine's view of segments: which file, which part of it, and what columns it has.

`scan_relation` builds one SQL relation over every segment of a request (UNION ALL of one SELECT
per segment), labelled by `__segment`, with `__time` as epoch milliseconds, restricted to each
segment's read window, and with columns a segment lacks filled with NULL (Druid treats a missing
column as all-null). Query types aggregate over this relation, grouping by `__segment`, so a
whole request runs in one DuckDB pass yet yields one partial per segment.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from query.duck import quote_ident, quote_str
from timeline import Interval, SegmentDescriptor

TIME_COLUMN = "__time"
METADATA_KEY = b"strata"


@dataclass(frozen=True, slots=True)
class SegmentInput:
    segment_id: str
    descriptor: SegmentDescriptor
    path: str  # the segment's index.parquet
    interval: Interval  # the part of the segment to read (already clipped to the query)


@dataclass(frozen=True)
class SegmentSchema:
    """Columns of one segment file and the ingestion facts stored in its footer."""

    columns: Mapping[str, pa.DataType]
    num_rows: int
    size: int
    dimensions: tuple[str, ...] = ()
    metrics: tuple[Mapping[str, Any], ...] = ()
    query_granularity: Any = None
    rollup: bool = False
    extra: Mapping[str, Any] = field(default_factory=dict)


@functools.lru_cache(maxsize=65536)
def _read_schema(path: str, mtime_ns: int) -> SegmentSchema:
    meta = pq.read_metadata(path)
    schema = meta.schema.to_arrow_schema()
    facts: dict[str, Any] = {}
    if schema.metadata and METADATA_KEY in schema.metadata:
        facts = orjson.loads(schema.metadata[METADATA_KEY])
    dims = facts.get("dimensions", [])
    return SegmentSchema(
        columns={f.name: f.type for f in schema},
        num_rows=meta.num_rows,
        size=os.path.getsize(path),
        dimensions=tuple(d["name"] if isinstance(d, dict) else d for d in dims),
        metrics=tuple(facts.get("metrics", [])),
        query_granularity=facts.get("queryGranularity"),
        rollup=bool(facts.get("rollup", False)),
        extra=facts,
    )


def read_schema(path: str) -> SegmentSchema:
    """Schema of a segment file, cached until the file changes."""
    return _read_schema(path, os.stat(path).st_mtime_ns)


def _duck_type(t: pa.DataType) -> str:
    if pa.types.is_timestamp(t):
        return "BIGINT"  # __time is exposed as epoch millis
    if pa.types.is_dictionary(t):
        return _duck_type(t.value_type)
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "VARCHAR"
    if pa.types.is_integer(t):
        return "BIGINT"
    if pa.types.is_float32(t):
        return "FLOAT"
    if pa.types.is_floating(t):
        return "DOUBLE"
    if pa.types.is_boolean(t):
        return "BOOLEAN"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return "BLOB"
    return "VARCHAR"


duck_type = _duck_type  # public name for other modules (results typed for SQL, e.g. having filters)


def unified_types(schemas: Iterable[SegmentSchema], columns: Iterable[str]) -> dict[str, str]:
    """DuckDB type per column across segments: numeric types widen, anything else mixed -> VARCHAR."""
    rank = {"BIGINT": 1, "FLOAT": 2, "DOUBLE": 3}
    out: dict[str, str] = {}
    schemas = list(schemas)
    for col in columns:
        seen = {_duck_type(s.columns[col]) for s in schemas if col in s.columns}
        if not seen:
            out[col] = "VARCHAR"  # a column no segment has: all-null strings, as Druid
        elif len(seen) == 1:
            out[col] = seen.pop()
        elif seen <= rank.keys():
            out[col] = max(seen, key=rank.__getitem__)
        else:
            out[col] = "VARCHAR"
    return out


def scan_relation(
    inputs: Sequence[SegmentInput], columns: Iterable[str], where: str | None = None
) -> tuple[str, dict[str, str]]:
    """SQL for the union of all inputs with `__segment`, `__time` (ms) and `columns`.

    Returns the SQL text and the DuckDB type of each column. `where` is a per-row predicate over
    the projected columns, applied inside each branch so DuckDB can push it into the Parquet scan.
    """
    wanted = [c for c in dict.fromkeys(columns) if c not in (TIME_COLUMN, "__segment")]
    schemas = [read_schema(i.path) for i in inputs]
    types = unified_types(schemas, wanted)
    types[TIME_COLUMN] = "BIGINT"
    branches = []
    for inp, schema in zip(inputs, schemas, strict=True):
        projections = [
            f"{quote_str(inp.segment_id)} AS __segment",
            f"epoch_ms({TIME_COLUMN}) AS {TIME_COLUMN}",
        ]
        for col in wanted:
            if col in schema.columns:
                expr = quote_ident(col)
                if _duck_type(schema.columns[col]) != types[col]:
                    expr = f"CAST({expr} AS {types[col]})"
            else:
                expr = f"CAST(NULL AS {types[col]})"
            projections.append(f"{expr} AS {quote_ident(col)}")
        time_window = (
            f"{TIME_COLUMN} >= make_timestamptz({inp.interval.start}::BIGINT * 1000) "
            f"AND {TIME_COLUMN} < make_timestamptz({inp.interval.end}::BIGINT * 1000)"
        )
        inner = (
            f"SELECT {', '.join(projections)} FROM read_parquet({quote_str(inp.path)}) WHERE {time_window}"
        )
        if where:
            inner = f"SELECT * FROM ({inner}) WHERE {where}"
        branches.append(inner)
    if not branches:
        cols = ", ".join(
            ["CAST(NULL AS VARCHAR) AS __segment", f"CAST(NULL AS BIGINT) AS {TIME_COLUMN}"]
            + [f"CAST(NULL AS {types[c]}) AS {quote_ident(c)}" for c in wanted]
        )
        return f"SELECT {cols} WHERE false", types
    return "\nUNION ALL\n".join(branches), types


def segment_facts(inputs: Sequence[SegmentInput]) -> Mapping[str, SegmentSchema]:
    return {i.segment_id: read_schema(i.path) for i in inputs}


def to_json_bytes(value: Any) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
