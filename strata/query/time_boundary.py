"""timeBoundary and the shared per-segment time extremes it is built on.

Partials hold one row per segment (`__segment`, `minTime`, `maxTime`, epoch ms); merging keeps the
overall extremes in one row, so merge is associative and any mix of cached segments combines.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Self

import pyarrow as pa
import pyarrow.compute as pc

from strata.query.base import SEGMENT_COLUMN, CommonFields, Query, register
from strata.query.cache_key import to_json_bytes
from strata.query.errors import invalid
from strata.query.filters import Filter, parse_filter
from timeline import format_instant

if TYPE_CHECKING:
    pass

MIN_TIME = "minTime"
MAX_TIME = "maxTime"
BOUNDS = (MIN_TIME, MAX_TIME)


def merge_extremes(partials: Sequence[pa.Table]) -> pa.Table:
    tables = [p for p in partials if p.num_rows]
    mins = [pc.min(t.column(MIN_TIME)).as_py() for t in tables]
    maxs = [pc.max(t.column(MAX_TIME)).as_py() for t in tables]
    mins, maxs = [m for m in mins if m is not None], [m for m in maxs if m is not None]
    rows = 1 if mins else 0
    return pa.table(
        {
            SEGMENT_COLUMN: pa.array([None] * rows, pa.string()),
            MIN_TIME: pa.array([min(mins)] if rows else [], pa.int64()),
            MAX_TIME: pa.array([max(maxs)] if rows else [], pa.int64()),
        }
    )


@register
@dataclass(frozen=True, kw_only=True)
class TimeBoundaryQuery(Query):
    query_type = "timeBoundary"
    intervals_required = False

    bound: str | None = None
    filter: Filter | None = None

    @classmethod
    def from_json(cls, obj: Mapping[str, Any], common: CommonFields) -> Self:
        bound = obj.get("bound")
        if bound is not None and bound not in BOUNDS:
            raise invalid("Unknown timeBoundary bound [%s]; expected minTime or maxTime", bound)
        return cls(**common.as_kwargs(), bound=bound, filter=parse_filter(obj.get("filter")))

    def to_json(self) -> dict[str, Any]:
        out = self.common_json()
        out["bound"] = self.bound
        out["filter"] = None if self.filter is None else self.filter.to_json()
        return out

    def cache_key(self) -> bytes:
        spec = {"bound": self.bound, "filter": None if self.filter is None else self.filter.to_json()}
        return self.query_type.encode() + b":" + to_json_bytes(spec)

    def merge(self, partials: Sequence[pa.Table]) -> pa.Table:
        return merge_extremes(partials)

    def finalize(self, merged: pa.Table) -> list[Any]:
        if merged.num_rows == 0:
            return []
        low, high = merged.column(MIN_TIME)[0].as_py(), merged.column(MAX_TIME)[0].as_py()
        if self.bound == MIN_TIME:
            return [{"timestamp": format_instant(low), "result": {MIN_TIME: format_instant(low)}}]
        if self.bound == MAX_TIME:
            return [{"timestamp": format_instant(high), "result": {MAX_TIME: format_instant(high)}}]
        result = {MIN_TIME: format_instant(low), MAX_TIME: format_instant(high)}
        return [{"timestamp": format_instant(low), "result": result}]
