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

from strata.ingestion.block import Block
from strata.ingestion.convert import convert_column, parse_timestamps
from strata.ingestion.errors import InsertTimeNull, ParseProblem
from strata.ingestion.spec import DimensionSpec, IngestionSpec, MetricSpec

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


def discover_dimensions(
    schema: pa.Schema, spec: IngestionSpec, known: Sequence[DimensionSpec]
) -> list[DimensionSpec]:
    """Schemaless: `known` plus this block's new flat columns.

    Never the timestamp column, dimensionExclusions, or metric names and inputs (as Druid).
    """
    excluded = {spec.timestamp.column, TIME, *spec.dimensions.exclusions}
    excluded |= {m.field_name for m in spec.metrics if m.field_name} | {m.name for m in spec.metrics}
    names = {d.name for d in known}
    out = list(known)
    for f in schema:
        if f.name in excluded or f.name in names:
            continue
        if pa.types.is_nested(f.type):
            continue  # multi-value / nested columns are not discovered
        out.append(DimensionSpec(f.name, "string"))
        names.add(f.name)
    return out


@dataclass
class Normalized:
    table: pa.Table
    problems: list[ParseProblem]
    bad_rows: int


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
    columns: dict[str, pa.Array] = {TIME: pa.array(times, pa.int64())}
    wanted = [(d.name, d.name, d.type) for d in dimensions]
    wanted += [(metric_input(m), m.field_name, metric_input_kind(m)) for m in spec.metrics if m.field_name]
    for out_name, src, kind in wanted:
        col = _column(raw, src)
        if col is None:
            columns[out_name] = pa.nulls(n, convert_column(pa.nulls(0), kind)[0].type)
            continue
        values, col_bad = convert_column(col, kind)
        columns[out_name] = values
        if col_bad.any():
            reasons[src] = (f"cannot parse as {kind}", col_bad)
            bad |= col_bad
    table = pa.table(columns)
    problems: list[ParseProblem] = []
    bad_count = int(bad.sum())
    if bad_count:
        table = table.filter(pa.array(~bad))
        rows = np.flatnonzero(bad)[:MAX_KEPT_PROBLEMS]
        lines = block.lines(rows)
        for row, line in zip(rows, lines, strict=True):
            why = "; ".join(
                f"column {src!r}: {what} {_value(raw, src, int(row))}"
                for src, (what, mask) in reasons.items()
                if mask[row]
            )
            problems.append(ParseProblem(block.source, int(line), why))
    return Normalized(table, problems, bad_count)


def _value(raw: pa.Table, column: str, row: int) -> str:
    if column not in raw.column_names:
        return "(absent)"
    text = repr(raw.column(column)[row].as_py())
    return text if len(text) <= 80 else text[:77] + "..."
