"""The engine's view of segments: which file, which part of it, and what columns it has.

`scan_relation` builds one SQL relation over every segment of a request, labelled by `__segment`
(and its small integer `__segment_index`), with `__time` as epoch milliseconds, restricted to each
segment's read window, and with columns a segment lacks filled with NULL (Druid treats a missing
column as all-null). Segments read whole share one multi-file Parquet scan; the others get a
SELECT each, joined by UNION ALL. Query types aggregate over this relation, grouping by segment,
so a whole request runs in one DuckDB pass yet yields one partial per segment.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from query.columns import SEGMENT_INDEX, TIME_COLUMN
from query.duck import duck_type, quote_ident, quote_str
from segment_engine.footer import file_version, per_request, read_footer, time_span
from segment_engine.memory_source import MemoryRows, always_within, is_memory, lookup, source_sql
from timeline import Interval, SegmentDescriptor

WINDOW_START = "__window_start"


def segment_labels(inputs: Sequence[SegmentInput]) -> list[str]:
    """Distinct segment ids of a request, in order: what `__segment_index` points into."""
    return list(dict.fromkeys(i.segment_id for i in inputs))


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

    @functools.cached_property
    def duck_types(self) -> dict[str, str]:
        """DuckDB type of each column, worked out once per file (requests read it per segment)."""
        return {name: duck_type(t) for name, t in self.columns.items()}


@functools.lru_cache(maxsize=65536)
def _read_schema(path: str, mtime_ns: int) -> SegmentSchema:
    footer = read_footer(path)
    schema = footer.schema
    facts: dict[str, Any] = {}
    if schema.metadata and METADATA_KEY in schema.metadata:
        facts = orjson.loads(schema.metadata[METADATA_KEY])
    dims = facts.get("dimensions", [])
    return SegmentSchema(
        columns={f.name: f.type for f in schema},
        num_rows=footer.num_rows,
        size=footer.size,
        dimensions=tuple(d["name"] if isinstance(d, dict) else d for d in dims),
        metrics=tuple(facts.get("metrics", [])),
        query_granularity=facts.get("queryGranularity"),
        rollup=bool(facts.get("rollup", False)),
        extra=facts,
    )


def read_schema(path: str) -> SegmentSchema:
    """Schema of a segment file, cached until the file changes; of live rows held in memory."""
    if is_memory(path):
        return _memory_schema(lookup(path))
    return per_request("schema", path, _file_schema)


def _file_schema(path: str) -> SegmentSchema:
    return _read_schema(path, file_version(path))


def _memory_schema(rows: MemoryRows) -> SegmentSchema:
    facts = rows.facts
    dims = facts.get("dimensions", [])
    return SegmentSchema(
        columns=rows.columns,
        num_rows=rows.num_rows,
        size=sum(rows.part_bytes.values()),
        dimensions=tuple(d["name"] if isinstance(d, dict) else d for d in dims),
        metrics=tuple(facts.get("metrics", [])),
        query_granularity=facts.get("queryGranularity"),
        rollup=bool(facts.get("rollup", False)),
        extra=facts,
    )


def unified_types(schemas: Iterable[SegmentSchema], columns: Iterable[str]) -> dict[str, str]:
    """DuckDB type per column across segments: numeric types widen, anything else mixed -> VARCHAR."""
    rank = {"BIGINT": 1, "FLOAT": 2, "DOUBLE": 3}
    out: dict[str, str] = {}
    schemas = list(schemas)
    for col in columns:
        seen = {s.duck_types[col] for s in schemas if col in s.columns}
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
    inputs: Sequence[SegmentInput],
    columns: Iterable[str],
    where: str | None = None,
    window_starts: Mapping[str, int] | None = None,
    labelled: bool = True,
) -> tuple[str, dict[str, str]]:
    """SQL for the union of all inputs with `__segment`, `__time` (ms) and `columns`.

    Returns the SQL text and the DuckDB type of each column. `where` is a per-row predicate over
    the projected columns, applied inside each branch so DuckDB can push it into the Parquet scan.
    `window_starts` (segment id -> ms) adds a constant `__window_start` column per branch, so a
    query grouping across segments can still take the earliest start among segments with rows.
    `labelled=False` leaves `__segment` and `__segment_index` null in the multi-file scan, for a
    pass grouping across segments: its SQL then holds no per-file lists of ids (~100 bytes each).

    Segments read whole and already of the unified types share one multi-file `read_parquet`
    (DuckDB parallelises one big scan far better than a hundred small ones); the rest (partly
    overshadowed or clipped by the query, missing or differently typed columns) get a branch each.
    """
    wanted = [c for c in dict.fromkeys(columns) if c not in (TIME_COLUMN, "__segment")]
    schemas = [read_schema(i.path) for i in inputs]
    types = unified_types(schemas, wanted)
    types[TIME_COLUMN] = "BIGINT"
    labels = {label: i for i, label in enumerate(segment_labels(inputs))}
    shared = _shared_scan_positions(inputs, schemas, wanted, types)
    branches = []
    if len(shared) > 1:
        shared_inputs = [inputs[i] for i in shared]
        # DuckDB matches a file's columns to the first file's by name; only differing physical
        # types need `union_by_name`, which reads every file's schema before the scan starts
        layouts = {tuple(schemas[i].columns[c] for c in (TIME_COLUMN, *wanted)) for i in shared}
        scan = _multi_file_scan(shared_inputs, labels if labelled else None, wanted, where, window_starts,
                                by_name=len(layouts) > 1)  # fmt: skip
        branches.append(scan)
    skip = set(shared) if len(shared) > 1 else set()
    for pos, (inp, schema) in enumerate(zip(inputs, schemas, strict=True)):
        if pos in skip:
            continue
        projections = [
            f"{quote_str(inp.segment_id)} AS __segment",
            f"CAST({labels[inp.segment_id]} AS BIGINT) AS {SEGMENT_INDEX}",
            f"epoch_ms({TIME_COLUMN}) AS {TIME_COLUMN}",
        ]
        if window_starts is not None:
            start = window_starts.get(inp.segment_id)
            projections.append(f"CAST({_sql_int(start)} AS BIGINT) AS {WINDOW_START}")
        for col in wanted:
            if col in schema.columns:
                expr = quote_ident(col)
                if schema.duck_types[col] != types[col]:
                    expr = f"CAST({expr} AS {types[col]})"
            else:
                expr = f"CAST(NULL AS {types[col]})"
            projections.append(f"{expr} AS {quote_ident(col)}")
        time_window = (
            f"{TIME_COLUMN} >= make_timestamptz({inp.interval.start}::BIGINT * 1000) "
            f"AND {TIME_COLUMN} < make_timestamptz({inp.interval.end}::BIGINT * 1000)"
        )
        if is_memory(inp.path) and always_within(inp.path, inp.interval.start, inp.interval.end):
            time_window = "true"  # a live segment read whole: no row can lie outside the window
        inner = f"SELECT {', '.join(projections)} FROM {source_sql(inp.path)} WHERE {time_window}"
        if where:
            inner = f"SELECT * FROM ({inner}) WHERE {where}"
        branches.append(inner)
    if not branches:
        cols = ", ".join(
            ["CAST(NULL AS VARCHAR) AS __segment", f"CAST(NULL AS BIGINT) AS {SEGMENT_INDEX}"]
            + [f"CAST(NULL AS BIGINT) AS {TIME_COLUMN}"]
            + ([f"CAST(NULL AS BIGINT) AS {WINDOW_START}"] if window_starts is not None else [])
            + [f"CAST(NULL AS {types[c]}) AS {quote_ident(c)}" for c in wanted]
        )
        return f"SELECT {cols} WHERE false", types
    return "\nUNION ALL\n".join(branches), types


_VIRTUAL_COLUMNS = ("file_index", "filename", "file_row_number")


def _shared_scan_positions(
    inputs: Sequence[SegmentInput], schemas: Sequence[SegmentSchema], wanted: Sequence[str],
    types: Mapping[str, str],
) -> list[int]:  # fmt: skip
    """Inputs readable without a time filter or casts, each file once."""
    positions: list[int] = []
    paths: set[str] = set()
    for pos, (inp, schema) in enumerate(zip(inputs, schemas, strict=True)):
        if inp.path in paths or TIME_COLUMN not in schema.columns or is_memory(inp.path):
            continue
        if any(v in schema.columns for v in _VIRTUAL_COLUMNS):
            return []  # a real column would shadow DuckDB's file_index
        duck_types = schema.duck_types
        if not all(duck_types.get(c) == types[c] for c in wanted):
            continue
        if not reads_whole(inp):
            continue
        positions.append(pos)
        paths.add(inp.path)
    return positions


def _multi_file_scan(
    inputs: Sequence[SegmentInput], labels: Mapping[str, int] | None, wanted: Sequence[str],
    where: str | None, window_starts: Mapping[str, int] | None, by_name: bool,
) -> str:  # fmt: skip
    """One `read_parquet` over whole files; per-file values are looked up by DuckDB's file_index."""
    index = "CAST(file_index AS BIGINT) + 1"
    if labels is None:
        projections = ["CAST(NULL AS VARCHAR) AS __segment", f"CAST(NULL AS BIGINT) AS {SEGMENT_INDEX}"]
    else:
        ids = ", ".join(quote_str(i.segment_id) for i in inputs)
        positions = ", ".join(str(labels[i.segment_id]) for i in inputs)
        projections = [
            f"[{ids}][{index}] AS __segment",
            f"CAST([{positions}] AS BIGINT[])[{index}] AS {SEGMENT_INDEX}",
        ]
    projections.append(f"epoch_ms({TIME_COLUMN}) AS {TIME_COLUMN}")
    if window_starts is not None:
        starts = ", ".join(_sql_int(window_starts.get(i.segment_id)) for i in inputs)
        projections.append(f"CAST([{starts}] AS BIGINT[])[{index}] AS {WINDOW_START}")
    projections += [quote_ident(c) for c in wanted]
    files = ", ".join(quote_str(i.path) for i in inputs)
    options = ", union_by_name = true" if by_name else ""
    inner = f"SELECT {', '.join(projections)} FROM read_parquet([{files}]{options})"
    return f"SELECT * FROM ({inner}) WHERE {where}" if where else inner


def _sql_int(value: int | None) -> str:
    return "NULL" if value is None else str(int(value))


def segment_facts(inputs: Sequence[SegmentInput]) -> Mapping[str, SegmentSchema]:
    return {i.segment_id: read_schema(i.path) for i in inputs}


# -- where a segment's rows lie, from the footer's `__time` statistics (see segment_engine.data_window)
@functools.lru_cache(maxsize=65536)
def _time_range(path: str, mtime_ns: int) -> tuple[int, int] | None:
    footer = read_footer(path)
    if TIME_COLUMN not in footer.schema.names or footer.num_rows == 0:
        return None
    span = time_span(path)
    return span if span is not None else _scan_range(path)


def _scan_range(path: str) -> tuple[int, int] | None:
    times = pq.read_table(path, columns=[TIME_COLUMN]).column(TIME_COLUMN).cast("int64")
    bounds = pc.min_max(times).as_py()
    return None if bounds["min"] is None else (bounds["min"], bounds["max"])


def data_interval(path: str) -> Interval | None:
    """[first row time, last row time + 1ms) of a segment file; None when it has no rows."""
    if is_memory(path):
        bounds = lookup(path).time_range
        return None if bounds is None else Interval(bounds[0], bounds[1] + 1)
    return per_request("data", path, _file_data_interval)


def _file_data_interval(path: str) -> Interval | None:
    bounds = _time_range(path, file_version(path))
    return None if bounds is None else Interval(bounds[0], bounds[1] + 1)


def reads_whole(inp: SegmentInput) -> bool:
    """Whether the read window holds every row of the segment (no time filter needed)."""
    data = data_interval(inp.path)
    return data is None or inp.interval.contains(data)
