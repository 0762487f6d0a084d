"""Rows -> segment rows: rollup (DuckDB GROUP BY) or per-row metrics, then the segment sort order.

Rows with the same time chunk, truncated `__time` and dimension values combine when rollup is on;
the result is sorted by chunk, `__time`, then dimensions (nulls first, as Druid orders them).
Sketch metrics are built in Python from each group's values, a cost paid only when a spec has one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from strata.ingestion.memory_pool import INGEST_POOL
from strata.ingestion.normalize import TIME, metric_input
from strata.ingestion.scratch_duck import scratch_connection
from strata.ingestion.segment_columns import sort_keys
from strata.ingestion.spec import DimensionSpec, MetricSpec
from strata.storage.segment_layout import JSON_TYPE, is_json

CHUNK = "__chunk"
_SQL_TYPE = {"long": "BIGINT", "double": "DOUBLE", "float": "FLOAT"}
_AGG = {"Sum": "SUM", "Min": "MIN", "Max": "MAX"}


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _metric_sql(m: MetricSpec, rollup: bool) -> str:
    if m.type == "count":
        return "COUNT(*)::BIGINT" if rollup else "1::BIGINT"
    src = _q(metric_input(m))
    if m.is_sketch:
        return f"LIST({src}) FILTER (WHERE {src} IS NOT NULL)" if rollup else src
    kind, op = m.type[:-3], m.type[-3:]
    return f"{_AGG[op]}({src})::{_SQL_TYPE[kind]}" if rollup else src


def build_segment_rows(
    table: pa.Table, dimensions: Sequence[DimensionSpec], metrics: Sequence[MetricSpec], rollup: bool
) -> pa.Table:
    """Columns: `__chunk`, `__time` (int64 ms), dimensions, metrics; sorted for segment writing."""
    rows = segment_rows(table, dimensions, metrics, rollup)
    return rows.take(segment_order(rows, dimensions))


def segment_rows(
    table: pa.Table, dimensions: Sequence[DimensionSpec], metrics: Sequence[MetricSpec], rollup: bool
) -> pa.Table:
    """The segment rows, not yet sorted: `segment_order` gives their order.

    Kept apart so the caller can sort while it copies columns, and gather each segment's rows in
    its own writer thread instead of copying the whole table once in sort order first.
    """
    keys = _sort_keys(dimensions)
    if rollup:
        # one chunk, as before: scanning chunks in parallel lets the order of LIST() (sketch inputs)
        # and so the sketch bytes vary from run to run
        out = _group(table.combine_chunks(INGEST_POOL), keys, metrics)
    else:
        out = table.select(keys)
        for m in metrics:
            col = (
                pa.array(np.ones(table.num_rows, np.int64))
                if m.type == "count"
                else table.column(metric_input(m))
            )
            out = out.append_column(m.name, col)
    for m in metrics:  # one sketch per row, so building them before sorting changes nothing
        if m.is_sketch:
            i = out.column_names.index(m.name)
            out = out.set_column(i, m.name, sketch_column(out.column(m.name), m, rollup))
    return out


def _sort_keys(dimensions: Sequence[DimensionSpec]) -> list[str]:
    return [CHUNK, TIME, *(d.name for d in dimensions)]


def segment_order(rows: pa.Table, dimensions: Sequence[DimensionSpec]) -> pa.UInt64Array:
    """Stable order by chunk, `__time`, dimensions, nulls first (as Druid orders a segment).

    A time chunk usually grows with `__time`, and then sorting without the chunk key already yields
    the same order (stable sorts on keys that agree): checked, and sorted again with it otherwise.
    Arrow's multi-key sort compares later keys only on ties: far cheaper than a full SQL ORDER BY.
    It reads chunked columns as fast as contiguous ones.
    """
    keys = _sort_keys(dimensions)
    rows = sort_keys(rows.select(keys), keys)
    order = pc.sort_indices(
        rows, sort_keys=[(k, "ascending", "at_start") for k in keys[1:]], memory_pool=INGEST_POOL
    )
    chunks = rows.column(CHUNK).to_numpy()[order.to_numpy()]
    if bool((chunks[1:] >= chunks[:-1]).all()):
        return order
    return pc.sort_indices(
        rows, sort_keys=[(k, "ascending", "at_start") for k in keys], memory_pool=INGEST_POOL
    )


def _group(table: pa.Table, keys: list[str], metrics: Sequence[MetricSpec]) -> pa.Table:
    select = [_q(k) for k in keys] + [f"{_metric_sql(m, True)} AS {_q(m.name)}" for m in metrics]
    sql = f"SELECT {', '.join(select)} FROM rows GROUP BY {', '.join(_q(k) for k in keys)}"
    with scratch_connection() as con:
        con.register("rows", table)
        out = con.sql(sql).to_arrow_table()
    for i, name in enumerate(out.column_names):  # JSON keys come back as plain text
        if name in table.column_names and is_json(table.schema.field(name).type):
            storage = out.column(i).combine_chunks().cast(pa.string())
            out = out.set_column(i, name, pa.ExtensionArray.from_storage(JSON_TYPE, storage))
    return out


def sketch_column(values: pa.ChunkedArray, metric: MetricSpec, rollup: bool) -> pa.Array:
    """Serialized sketches, one per row: of each group's value list (rollup) or of the row's value."""
    import datasketches as ds

    raw = metric.raw
    if metric.type == "HLLSketchBuild":
        lg_k = int(raw.get("lgK", 12))
        tgt = getattr(ds.tgt_hll_type, str(raw.get("tgtHllType", "HLL_4")))

        def build(items: list[Any]) -> bytes:
            sk = ds.hll_sketch(lg_k, tgt)
            for v in items:
                sk.update(str(v))
            return bytes(sk.serialize_compact())
    else:
        lg_k = max(4, int(raw.get("size", 16384)).bit_length() - 1)

        def build(items: list[Any]) -> bytes:
            sk = ds.update_theta_sketch(lg_k)
            for v in items:
                sk.update(str(v))
            return bytes(sk.compact().serialize())

    if rollup:
        return pa.array([build(items or []) for items in values.to_pylist()], pa.binary())
    return pa.array([build([] if v is None else [v]) for v in values.to_pylist()], pa.binary())
