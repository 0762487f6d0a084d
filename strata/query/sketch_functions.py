"""DuckDB scalar functions building and merging Apache DataSketches HLL sketches.

DuckDB has no Python aggregate UDFs, so SQL gathers each group's values with `list(DISTINCT x)`
(or its sketches with `list(s)`) and these Arrow UDFs turn every list into one serialized compact
sketch. Duplicates never change an HLL sketch, so DISTINCT only saves work.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import datasketches
import duckdb
import pyarrow as pa
from duckdb.func import ARROW

HLL_BUILD = {
    "VARCHAR": "strata_hll_build_str",
    "BIGINT": "strata_hll_build_long",
    "DOUBLE": "strata_hll_build_double",
}
HLL_UNION = "strata_hll_union"
HLL_TYPES = {
    "HLL_4": datasketches.tgt_hll_type.HLL_4,
    "HLL_6": datasketches.tgt_hll_type.HLL_6,
    "HLL_8": datasketches.tgt_hll_type.HLL_8,
}


def _build(values: pa.Array, lg_k: pa.Array, tgt: pa.Array) -> pa.Array:
    out: list[bytes | None] = []
    ks, types = lg_k.to_pylist(), tgt.to_pylist()
    for row, k, t in zip(values.to_pylist(), ks, types, strict=True):
        sketch = datasketches.hll_sketch(k, HLL_TYPES[t])
        for v in row or ():
            if v is not None:
                sketch.update(v)
        out.append(sketch.serialize_compact())
    return pa.array(out, pa.binary())


def _union(values: pa.Array, lg_k: pa.Array, tgt: pa.Array) -> pa.Array:
    out: list[bytes | None] = []
    for row, k, t in zip(values.to_pylist(), lg_k.to_pylist(), tgt.to_pylist(), strict=True):
        union = datasketches.hll_union(k)
        for blob in row or ():
            if blob is not None:
                union.update(datasketches.hll_sketch.deserialize(blob))
        out.append(union.get_result(HLL_TYPES[t]).serialize_compact())
    return pa.array(out, pa.binary())


def estimates(blobs: pa.Array) -> pa.Array:
    """The distinct-count estimate of each serialized sketch (0 for a missing one)."""
    return pa.array(
        [
            0.0 if b is None else datasketches.hll_sketch.deserialize(b).get_estimate()
            for b in blobs.to_pylist()
        ],
        pa.float64(),
    )


def install(conn: duckdb.DuckDBPyConnection) -> None:
    functions: list[tuple[str, Callable[..., Any], str]] = [
        *((name, _build, f"{elem}[]") for elem, name in HLL_BUILD.items()),
        (HLL_UNION, _union, "BLOB[]"),
    ]
    for name, fn, list_type in functions:
        try:
            conn.create_function(
                name, fn, [list_type, "INTEGER", "VARCHAR"], "BLOB", type=ARROW, side_effects=False
            )
        except duckdb.Error as e:
            if "already" not in str(e).lower():
                raise
