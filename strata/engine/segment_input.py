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

from strata.engine.footer import file_version, per_request, read_footer, time_span
from strata.engine.mapped_source import ORDINAL, MappedRows, mapped, view
from strata.engine.memory_source import MemoryRows, always_within, is_memory, lookup, source_sql
from strata.query.columns import SEGMENT_INDEX, TIME_COLUMN
from strata.query.duck import MULTI_VALUE, duck_type, element_type, is_list, quote_ident, quote_str
from strata.storage.segment_layout import column_types, dimension_entries, hidden_columns, multi_value_columns
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
    """Columns of one segment file and the ingestion facts stored in its footer.

    `columns` are the data source's columns (the typed path columns of nested values are not:
    `hidden`); `druid_types` Druid's type of each (`strata.storage.segment_layout`).
    """

    columns: Mapping[str, pa.DataType]
    num_rows: int
    size: int
    dimensions: tuple[str, ...] = ()
    metrics: tuple[Mapping[str, Any], ...] = ()
    query_granularity: Any = None
    rollup: bool = False
    extra: Mapping[str, Any] = field(default_factory=dict)
    hidden: Mapping[str, pa.DataType] = field(default_factory=dict)

    @functools.cached_property
    def druid_types(self) -> dict[str, str]:
        """Druid's type of each column: the footer's, else from the Arrow type."""
        return column_types(self.extra, [pa.field(n, t) for n, t in self.columns.items()])

    @functools.cached_property
    def duck_types(self) -> dict[str, str]:
        """DuckDB type of each column, worked out once per file (requests read it per segment); a
        multi-value STRING stored as lists is `MULTI_VALUE`."""
        multi = multi_value_columns(self.extra)
        return {name: MULTI_VALUE if name in multi else duck_type(t) for name, t in self.columns.items()}


@functools.lru_cache(maxsize=65536)
def _read_schema(path: str, mtime_ns: int) -> SegmentSchema:
    footer = read_footer(path)
    schema = footer.schema
    facts: dict[str, Any] = {}
    if schema.metadata and METADATA_KEY in schema.metadata:
        facts = orjson.loads(schema.metadata[METADATA_KEY])
    hidden = hidden_columns(facts)
    return SegmentSchema(
        columns={f.name: f.type for f in schema if f.name not in hidden},
        num_rows=footer.num_rows,
        size=footer.size,
        dimensions=tuple(d["name"] for d in dimension_entries(facts)),
        metrics=tuple(facts.get("metrics", [])),
        query_granularity=facts.get("queryGranularity"),
        rollup=bool(facts.get("rollup", False)),
        extra=facts,
        hidden={f.name: f.type for f in schema if f.name in hidden},
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
    hidden = hidden_columns(facts)
    return SegmentSchema(
        columns={n: t for n, t in rows.columns.items() if n not in hidden},
        num_rows=rows.num_rows,
        size=sum(rows.part_bytes.values()),
        dimensions=tuple(d["name"] for d in dimension_entries(facts)),
        metrics=tuple(facts.get("metrics", [])),
        query_granularity=facts.get("queryGranularity"),
        rollup=bool(facts.get("rollup", False)),
        extra=facts,
    )


_RANK = {"BIGINT": 1, "FLOAT": 2, "DOUBLE": 3}


def unified_types(schemas: Iterable[SegmentSchema], columns: Iterable[str]) -> dict[str, str]:
    """DuckDB type per column across segments, as Druid's broker unifies a column typed differently
    by segments: numbers widen; a multi-value string stored as lists in some segments and as strings
    in others is read as lists everywhere; a scalar beside arrays of its kind reads as a one-element
    array; COMPLEX<json> beside anything is COMPLEX<json>; any other mix is VARCHAR."""
    out: dict[str, str] = {}
    schemas = list(schemas)
    for col in columns:
        seen = {s.duck_types[col] for s in schemas if col in s.columns}
        out[col] = _unify(seen) if seen else "VARCHAR"  # a column no segment has: all-null strings
    return out


def _unify(seen: set[str]) -> str:
    if len(seen) == 1:
        return next(iter(seen))
    if "JSON" in seen:
        return "JSON"
    if seen <= _RANK.keys():
        return max(seen, key=_RANK.__getitem__)
    if seen == {"VARCHAR", MULTI_VALUE}:
        return MULTI_VALUE
    if any(is_list(t) for t in seen) and MULTI_VALUE not in seen:
        elements = {element_type(t) if is_list(t) else t for t in seen}
        return f"{_unify(elements)}[]"
    return "VARCHAR"


def _converted(expr: str, source: str, target: str) -> str:
    """`expr` of DuckDB type `source` read as `target` (a scalar as a one-element list)."""
    if target == "JSON":
        return f"CAST(to_json({expr}) AS JSON)"
    if is_list(target) and not is_list(source):
        return f"CASE WHEN {expr} IS NULL THEN NULL ELSE [CAST({expr} AS {element_type(target)})] END"
    return f"CAST({expr} AS {target})"


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
    by_ordinal = labels if labelled else None
    groups = _arrow_groups([inputs[i] for i in shared], wanted)
    for group in groups:
        branches.append(_arrow_scan(group, by_ordinal, wanted, where, window_starts))
    arrow = {id(inp) for group in groups for inp, _ in group}
    skip = {pos for pos in shared if id(inputs[pos]) in arrow}
    files = [pos for pos in shared if pos not in skip]
    if len(files) > 1:
        # DuckDB matches a file's columns to the first file's by name; only differing physical
        # types need `union_by_name`, which reads every file's schema before the scan starts
        layouts = {tuple(schemas[i].columns[c] for c in (TIME_COLUMN, *wanted)) for i in files}
        scan = _multi_file_scan([inputs[i] for i in files], by_ordinal, wanted, where, window_starts,
                                by_name=len(layouts) > 1)  # fmt: skip
        branches.append(scan)
        skip.update(files)
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
                    expr = _converted(expr, schema.duck_types[col], types[col])
            else:
                expr = f"CAST(NULL AS {types[col]})"
            projections.append(f"{expr} AS {quote_ident(col)}")
        time_window = (
            f"{TIME_COLUMN} >= make_timestamptz({inp.interval.start}::BIGINT * 1000) "
            f"AND {TIME_COLUMN} < make_timestamptz({inp.interval.end}::BIGINT * 1000)"
        )
        if is_memory(inp.path) and always_within(inp.path, inp.interval.start, inp.interval.end):
            time_window = "true"  # a live segment read whole: no row can lie outside the window
        source = mapped(inp.path)
        rows = view([source], list(schema.columns)) if source is not None else source_sql(inp.path)
        inner = f"SELECT {', '.join(projections)} FROM {rows} WHERE {time_window}"
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
    projections = _per_segment(list(inputs), "CAST(file_index AS BIGINT) + 1", labels, window_starts)
    projections += map(quote_ident, wanted)
    files = ", ".join(quote_str(i.path) for i in inputs)
    options = ", union_by_name = true" if by_name else ""
    inner = f"SELECT {', '.join(projections)} FROM read_parquet([{files}]{options})"
    return f"SELECT * FROM ({inner}) WHERE {where}" if where else inner


def _arrow_groups(
    inputs: Sequence[SegmentInput], wanted: Sequence[str]
) -> list[list[tuple[SegmentInput, MappedRows]]]:
    """Whole segments with an Arrow copy, grouped by their copies' types (each group one view)."""
    groups: dict[tuple[pa.DataType, ...], list[tuple[SegmentInput, MappedRows]]] = {}
    for inp in inputs:
        rows = mapped(inp.path)
        if rows is None:
            continue
        layout = tuple(rows.types[c] for c in (TIME_COLUMN, *wanted))
        groups.setdefault(layout, []).append((inp, rows))
    return list(groups.values())


def _arrow_scan(
    group: Sequence[tuple[SegmentInput, MappedRows]], labels: Mapping[str, int] | None, wanted: Sequence[str],
    where: str | None, window_starts: Mapping[str, int] | None,
) -> str:  # fmt: skip
    """One scan over the Arrow copies of whole segments; per-segment values by their ordinal."""
    base = min(rows.ordinal for _, rows in group)
    slots: list[SegmentInput | None] = [None] * (max(rows.ordinal for _, rows in group) - base + 1)
    for inp, rows in group:
        slots[rows.ordinal - base] = inp
    projections = _per_segment(slots, f"{ORDINAL} - {base - 1}", labels, window_starts)
    projections += map(quote_ident, wanted)
    source = view([rows for _, rows in group], [TIME_COLUMN, *wanted])
    inner = f"SELECT {', '.join(projections)} FROM {source}"
    return f"SELECT * FROM ({inner}) WHERE {where}" if where else inner


def _per_segment(
    slots: Sequence[SegmentInput | None], index: str, labels: Mapping[str, int] | None,
    window_starts: Mapping[str, int] | None,
) -> list[str]:  # fmt: skip
    """`__segment`, `__segment_index`, `__time` (and `__window_start`) of a shared scan: list
    literals over its segments (None: a slot no row points at), indexed by `index`, a 1-based SQL
    expression per row."""
    if labels is None:
        projections = ["CAST(NULL AS VARCHAR) AS __segment", f"CAST(NULL AS BIGINT) AS {SEGMENT_INDEX}"]
    else:
        ids = ", ".join("NULL" if i is None else quote_str(i.segment_id) for i in slots)
        positions = ", ".join("NULL" if i is None else str(labels[i.segment_id]) for i in slots)
        projections = [
            f"CAST([{ids}] AS VARCHAR[])[{index}] AS __segment",
            f"CAST([{positions}] AS BIGINT[])[{index}] AS {SEGMENT_INDEX}",
        ]
    projections.append(f"epoch_ms({TIME_COLUMN}) AS {TIME_COLUMN}")  # the order of every branch
    if window_starts is not None:
        starts = ", ".join("NULL" if i is None else _sql_int(window_starts.get(i.segment_id)) for i in slots)
        projections.append(f"CAST([{starts}] AS BIGINT[])[{index}] AS {WINDOW_START}")
    return projections


def _sql_int(value: int | None) -> str:
    return "NULL" if value is None else str(int(value))


def segment_facts(inputs: Sequence[SegmentInput]) -> Mapping[str, SegmentSchema]:
    return {i.segment_id: read_schema(i.path) for i in inputs}


# -- where a segment's rows lie, from the footer's `__time` statistics (see strata.engine.data_window)
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
