"""The filtered row relation every query type reads: all segments of a request, one SQL text."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from strata.engine.segment_input import SegmentInput, scan_relation
from strata.query.filters import Filter
from strata.query.virtual_columns import NO_VIRTUAL_COLUMNS, VirtualColumns


def filtered_relation(
    inputs: Sequence[SegmentInput],
    columns: Iterable[str],
    flt: Filter | None,
    window_starts: Mapping[str, int] | None = None,
    virtual: VirtualColumns = NO_VIRTUAL_COLUMNS,
    labelled: bool = True,
) -> tuple[str, dict[str, str]]:
    """SQL over all `inputs` with `__segment`, `__time`, `columns` and the filter's columns.

    The filter needs the unified column types to render, and the relation needs the rendered
    filter (pushed into each segment's Parquet scan), so types come from a first, cheap pass.
    Virtual columns are projected over the scan; a filter that reads one applies after them.
    `labelled=False`: segment labels may be null (a pass grouping across segments).
    """
    wanted = list(dict.fromkeys(columns))
    if flt is not None:
        wanted += [c for c in sorted(flt.columns()) if c not in wanted]
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
