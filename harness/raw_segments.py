"""Test helper: segment files in the decided Parquet layout, built from raw rows.

Kept independent of the ingestion package so query tests exercise only the query engine; the
oracles in the tests read the same raw rows (`wikipedia_rows`) with plain DuckDB SQL or Python.
"""

from __future__ import annotations

import functools
import gzip
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from strata.data import WIKIPEDIA_SAMPLE
from strata.engine.segment_input import SegmentInput
from timeline import Interval, SegmentDescriptor, format_instant, parse_instant

HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS
VERSION = "2024-01-01T00:00:00.000Z"
WIKI_LONGS = ("added", "deleted", "delta")


@functools.lru_cache(maxsize=1)
def wikipedia_rows() -> pa.Table:
    """The wikipedia sample as the tutorial ingests it: strings, booleans as "true"/"false", 3 longs."""
    with gzip.open(WIKIPEDIA_SAMPLE, "rt", encoding="utf-8") as f:
        records = [json.loads(line) for line in f]
    columns: dict[str, list[Any]] = {"__time": [parse_instant(r["time"]) for r in records]}
    names = sorted({k for r in records for k in r} - {"time"})
    for name in names:
        raw = [r.get(name) for r in records]
        if name in WIKI_LONGS:
            columns[name] = raw
        else:
            columns[name] = [
                None if v is None else str(v).lower() if isinstance(v, bool) else str(v) for v in raw
            ]
    arrays = {
        "__time": pa.array(columns.pop("__time"), pa.int64()).cast(pa.timestamp("ms", tz="UTC")),
        **{n: pa.array(v, pa.int64() if n in WIKI_LONGS else pa.string()) for n, v in columns.items()},
    }
    return pa.table(arrays)


def write_segments(
    rows: pa.Table,
    out_dir: Path,
    *,
    granularity_ms: int = HOUR_MS,
    data_source: str = "wiki",
    dimensions: Sequence[str] | None = None,
    metrics: Sequence[dict[str, Any]] = (),
    rows_per_segment: int | None = None,
) -> list[SegmentInput]:
    """One Parquet segment per time bucket (split further by `rows_per_segment`), in time order."""
    if rows.schema.field("__time").type != pa.timestamp("ms", tz="UTC"):
        rows = rows.set_column(0, "__time", rows.column("__time").cast(pa.timestamp("ms", tz="UTC")))
    metric_names = {m["name"] for m in metrics}
    if dimensions is None:
        dimensions = [c for c in rows.column_names if c != "__time" and c not in metric_names]
    millis = pc.cast(rows.column("__time"), pa.int64()).to_numpy()
    buckets = millis // granularity_ms * granularity_ms
    inputs: list[SegmentInput] = []
    for start in sorted(set(buckets.tolist())):
        part = rows.filter(pa.array(buckets == start))
        part = part.sort_by([("__time", "ascending"), *[(d, "ascending") for d in dimensions]])
        chunks = (
            [part]
            if rows_per_segment is None
            else [part.slice(i, rows_per_segment) for i in range(0, part.num_rows, rows_per_segment)]
        )
        interval = Interval(start, start + granularity_ms)
        for partition, chunk in enumerate(chunks):
            inputs.append(_write_one(chunk, out_dir, data_source, interval, partition, dimensions, metrics))
    return inputs


def _write_one(
    table: pa.Table,
    out_dir: Path,
    data_source: str,
    interval: Interval,
    partition: int,
    dimensions: Sequence[str],
    metrics: Sequence[dict[str, Any]],
) -> SegmentInput:
    start, end = format_instant(interval.start), format_instant(interval.end)
    seg_dir = out_dir / data_source / f"{start}_{end}" / VERSION / str(partition)
    seg_dir.mkdir(parents=True, exist_ok=True)
    facts = {
        "dataSource": data_source,
        "interval": str(interval),
        "version": VERSION,
        "partitionNum": partition,
        "dimensions": [{"name": d, "type": _dim_type(table.schema.field(d).type)} for d in dimensions],
        "metrics": list(metrics),
        "queryGranularity": {"type": "none"},
        "rollup": False,
        "numRows": table.num_rows,
    }
    table = table.replace_schema_metadata({b"strata": orjson.dumps(facts)})
    path = seg_dir / "index.parquet"
    pq.write_table(
        table, path, use_dictionary=[d for d in dimensions if table.schema.field(d).type == pa.string()]
    )
    segment_id = f"{data_source}_{start}_{end}_{VERSION}" + (f"_{partition}" if partition else "")
    return SegmentInput(segment_id, SegmentDescriptor(interval, VERSION, partition), str(path), interval)


def _dim_type(t: pa.DataType) -> str:
    if pa.types.is_integer(t):
        return "long"
    if pa.types.is_float32(t):
        return "float"
    if pa.types.is_floating(t):
        return "double"
    return "string"


def clip(inputs: Sequence[SegmentInput], interval: Interval) -> list[SegmentInput]:
    """The inputs a query over `interval` reads, each clipped to it (what a broker would send)."""
    out = []
    for inp in inputs:
        part = inp.interval.overlap(interval)
        if part is not None and not part.is_empty:
            out.append(SegmentInput(inp.segment_id, inp.descriptor, inp.path, part))
    return out
