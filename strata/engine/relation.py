"""The filtered row relation every query type reads: all segments of a request, one SQL text."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from strata.engine.segment_input import SegmentInput, scan_relation
from strata.engine.wrapped_source import physical_columns, produced_columns, split_filter, wrap
from strata.query.data_source import DataSource, wrappers
from strata.query.filters import Filter
from strata.query.virtual_columns import NO_VIRTUAL_COLUMNS, VirtualColumns


def filtered_relation(
    inputs: Sequence[SegmentInput],
    columns: Iterable[str],
    flt: Filter | None,
    window_starts: Mapping[str, int] | None = None,
    virtual: VirtualColumns = NO_VIRTUAL_COLUMNS,
    labelled: bool = True,
    source: DataSource | None = None,
    positions: bool = False,
) -> tuple[str, dict[str, str]]:
    """SQL over all `inputs` with `__segment`, `__time`, `columns` and the filter's columns.

    The filter needs the unified column types to render, and the relation needs the rendered
    filter (pushed into each segment's Parquet scan), so types come from a first, cheap pass.
    Virtual columns are projected over the scan; a filter that reads one applies after them.
    An `unnest` or `join` `source` wraps the scanned rows first (`strata.engine.wrapped_source`).
    `labelled=False`: segment labels may be null (a pass grouping across segments).
    `positions`: an unnest gives each element's position too (`wrapped_source.wrap`).
    """
    wanted = list(dict.fromkeys(columns))
    if flt is not None:
        wanted += [c for c in sorted(flt.columns()) if c not in wanted]
    if source is not None and wrappers(source):
        return _wrapped(inputs, wanted, flt, window_starts, virtual, labelled, source, positions)
    if not virtual.needed(wanted):
        if flt is None:
            return scan_relation(inputs, wanted, window_starts=window_starts, labelled=labelled)
        _, types = scan_relation(inputs, wanted, labelled=False)
        return scan_relation(inputs, wanted, flt.to_sql(types), window_starts, labelled)
    physical = virtual.physical(wanted)
    _, types = scan_relation(inputs, physical, labelled=False)
    reads_virtual = flt is not None and bool(virtual.needed(flt.columns()))
    pushed = None if flt is None or reads_virtual else flt.to_sql(types)
    relation, _ = scan_relation(inputs, physical, pushed, window_starts, labelled)
    relation, types = virtual.project(relation, types, wanted)
    if flt is not None and reads_virtual:
        relation = f"SELECT * FROM ({relation}) WHERE {flt.to_sql(types)}"
    return relation, types


def _wrapped(
    inputs: Sequence[SegmentInput], wanted: list[str], flt: Filter | None,
    window_starts: Mapping[str, int] | None, virtual: VirtualColumns, labelled: bool, source: DataSource,
    positions: bool,
) -> tuple[str, dict[str, str]]:  # fmt: skip
    """The relation of an unnest or join datasource: the filter's terms on segment columns pushed
    into the scan, the rest after the wrappers and the virtual columns."""
    needed = virtual.needed(wanted)
    over_wrapped = virtual.physical(wanted) if needed else wanted
    base = physical_columns(over_wrapped, source)
    segment_columns = set(base) - produced_columns(source) - virtual.names
    pushed, rest = split_filter(flt, segment_columns)
    _, types = scan_relation(inputs, base, labelled=False)
    where = None if pushed is None else pushed.to_sql(types)
    relation, types = scan_relation(inputs, base, where, window_starts, labelled)
    relation, types = wrap(relation, types, source, positions)
    if needed:
        relation, types = virtual.project(relation, types, wanted)
    if rest is not None:
        relation = f"SELECT * FROM ({relation}) WHERE {rest.to_sql(types)}"
    return relation, types
