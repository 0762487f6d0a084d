"""One block of raw rows -> the typed columns a segment is built from, and the rows that failed.

Output columns: `__time` (int64 epoch ms, the row's own timestamp), each dimension in its declared
type, and each metric's input as `__in_<metric>`; rows with any unparseable value are dropped and
reported with their line numbers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from strata.ingestion.block import Block
from strata.ingestion.convert import convert_column, parse_timestamps
from strata.ingestion.dimension_values import (
    is_nested,
    json_storage,
    json_values,
    stage_json,
    stage_multi_value,
)
from strata.ingestion.errors import InsertTimeNull, ParseProblem
from strata.ingestion.spec import DimensionSpec, IngestionSpec, MetricSpec
from strata.ingestion.transform import apply_transforms
from strata.storage.segment_layout import is_json

TIME = "__time"
MAX_KEPT_PROBLEMS = 100


def metric_input(metric: MetricSpec) -> str:
    return f"__in_{metric.name}"


def metric_input_kind(metric: MetricSpec) -> str:
    if metric.is_sketch:
        return "string"
    if metric.type.startswith("long"):
        return "long"
    return "float" if metric.type.startswith("float") else "double"


def _nested_values(column: pa.ChunkedArray) -> bool:
    """Objects, or lists holding lists or objects: what string-based discovery leaves out."""
    t = column.type
    if is_json(t):  # mixed values: nested when one of them is
        return any(is_nested(v) for v in json_values(pc.unique(json_storage(column))))
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return bool(pa.types.is_nested(t.value_type))
    return bool(pa.types.is_nested(t))


def discover_dimensions(
    table: pa.Table, spec: IngestionSpec, known: Sequence[DimensionSpec]
) -> list[DimensionSpec]:
    """`known` plus this block's new columns: with `useSchemaDiscovery` each one as an `auto`
    dimension, else (schemaless) each one without nested values as a string dimension (a list of
    literals makes it multi-value), as Druid's type-aware and string-based discovery do.

    Never the timestamp column, dimensionExclusions, or metric names and inputs (as Druid).
    """
    excluded = {spec.timestamp.column, TIME, *spec.dimensions.exclusions}
    excluded |= {m.field_name for m in spec.metrics if m.field_name} | {m.name for m in spec.metrics}
    names = {d.name for d in known}
    out = list(known)
    typed = spec.dimensions.use_schema_discovery
    for f in table.schema:
        if f.name in excluded or f.name in names:
            continue
        if not typed and _nested_values(table.column(f.name)):
            continue
        out.append(DimensionSpec(f.name, "auto" if typed else "string"))
        names.add(f.name)
    return out


@dataclass
class Normalized:
    table: pa.Table
    problems: list[ParseProblem]
    bad_rows: int
    filtered: int = 0  # rows the transformSpec's filter threw away


def _column(table: pa.Table, name: str) -> pa.ChunkedArray | None:
    return table.column(name) if name in table.column_names else None


def normalize_block(block: Block, spec: IngestionSpec, dimensions: Sequence[DimensionSpec]) -> Normalized:
    raw = block.table
    n = raw.num_rows
    ts_col = _column(raw, spec.timestamp.column)
    times, bad = parse_timestamps(
        ts_col if ts_col is not None else pa.nulls(n), spec.timestamp.format, spec.timestamp.missing_value
    )
    reasons: dict[str, tuple[str, np.ndarray]] = {}  # source column -> (what failed, rows)
    if bad.any():
        if spec.strict_time:
            raise InsertTimeNull(block.source, int(block.lines(np.flatnonzero(bad)[:1])[0]))
        reasons[spec.timestamp.column] = ("unparseable or missing timestamp", bad.copy())
    rejected = np.zeros(n, dtype=bool)  # rows the transformSpec's filter throws away
    if spec.transform is not None:
        done = apply_transforms(raw, times, spec.transform)
        raw, times = done.table, done.times
        if done.keep is not None:
            rejected = ~done.keep & ~bad
    columns: dict[str, pa.Array] = {TIME: pa.array(times, pa.int64())}
    wanted = [(d.name, d.name, d.type) for d in dimensions]
    wanted += [(metric_input(m), m.field_name, metric_input_kind(m)) for m in spec.metrics if m.field_name]
    handling = {d.name: d.multi_value_handling for d in dimensions}
    for out_name, src, kind in wanted:
        col = _column(raw, src)
        if kind in ("auto", "json"):
            columns[out_name] = stage_json(pa.nulls(n) if col is None else col)
            continue
        if col is None:
            columns[out_name] = pa.nulls(n, convert_column(pa.nulls(0), kind)[0].type)
            continue
        staged = (
            stage_multi_value(col, handling[out_name]) if kind == "string" and out_name in handling else None
        )
        if staged is not None:
            columns[out_name] = staged
            continue
        values, col_bad = convert_column(col, kind)
        columns[out_name] = values
        if col_bad.any():
            reasons[src] = (f"cannot parse as {kind}", col_bad)
            bad |= col_bad
    table = pa.table(columns)
    problems: list[ParseProblem] = []
    bad_count = int(bad.sum())
    if bad_count or rejected.any():
        table = table.filter(pa.array(~(bad | rejected)))
        rows = np.flatnonzero(bad)[:MAX_KEPT_PROBLEMS]
        lines = block.lines(rows)
        for row, line in zip(rows, lines, strict=True):
            why = "; ".join(
                f"column {src!r}: {what} {_value(raw, src, int(row))}"
                for src, (what, mask) in reasons.items()
                if mask[row]
            )
            problems.append(ParseProblem(block.source, int(line), why))
    return Normalized(table, problems, bad_count, int(rejected.sum()))


def _value(raw: pa.Table, column: str, row: int) -> str:
    if column not in raw.column_names:
        return "(absent)"
    text = repr(raw.column(column)[row].as_py())
    return text if len(text) <= 80 else text[:77] + "..."
