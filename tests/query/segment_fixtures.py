"""Test helper shared by the query tests: segment files from raw rows, by granularity name.

A thin layer over `raw_segments` (the Parquet layout writer) that takes Druid granularity names
and can add ingested HLL sketch metrics, as the ingestion piece writes them.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import datasketches
import pyarrow as pa

from harness.raw_segments import DAY_MS, HOUR_MS, clip, wikipedia_rows
from harness.raw_segments import write_segments as _write_segments
from strata.engine.segment_input import SegmentInput

__all__ = ["GRANULARITY_MS", "clip", "hll_column", "wikipedia_rows", "write_segments"]

GRANULARITY_MS = {"minute": 60_000, "hour": HOUR_MS, "six_hour": 6 * HOUR_MS, "day": DAY_MS}


def write_segments(
    rows: pa.Table,
    out_dir: Path,
    granularity: str = "hour",
    *,
    data_source: str = "wiki",
    dimensions: Sequence[str] | None = None,
    metrics: Sequence[dict[str, Any]] = (),
    rows_per_segment: int | None = None,
) -> list[SegmentInput]:
    """One segment per `granularity` bucket (UTC), split further by `rows_per_segment`."""
    if granularity not in GRANULARITY_MS:
        raise ValueError(f"unsupported fixture granularity {granularity!r}")
    return _write_segments(
        rows,
        Path(out_dir),
        granularity_ms=GRANULARITY_MS[granularity],
        data_source=data_source,
        dimensions=dimensions,
        metrics=metrics,
        rows_per_segment=rows_per_segment,
    )


def hll_column(values: pa.Array | pa.ChunkedArray, lg_k: int = 12) -> pa.Array:
    """One serialized HLL_4 sketch per row holding that row's value (rollup-free ingestion)."""
    out: list[bytes | None] = []
    for v in values.to_pylist():
        sketch = datasketches.hll_sketch(lg_k, datasketches.tgt_hll_type.HLL_4)
        if v is not None:
            sketch.update(v)
        out.append(sketch.serialize_compact())
    return pa.array(out, pa.binary())
