"""The filtered row relation every query type reads: all segments of a request, one SQL text."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from query.filters import Filter
from query.segment_input import SegmentInput, scan_relation


def filtered_relation(
    inputs: Sequence[SegmentInput],
    columns: Iterable[str],
    flt: Filter | None,
    window_starts: Mapping[str, int] | None = None,
) -> tuple[str, dict[str, str]]:
    """SQL over all `inputs` with `__segment`, `__time`, `columns` and the filter's columns.

    The filter needs the unified column types to render, and the relation needs the rendered
    filter (pushed into each segment's Parquet scan), so types come from a first, cheap pass.
    """
    wanted = list(dict.fromkeys(columns))
    if flt is None:
        return scan_relation(inputs, wanted, window_starts=window_starts)
    wanted += [c for c in sorted(flt.columns()) if c not in wanted]
    _, types = scan_relation(inputs, wanted)
    return scan_relation(inputs, wanted, where=flt.to_sql(types), window_starts=window_starts)
