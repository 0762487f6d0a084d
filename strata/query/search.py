"""The search query: dimension values matching a search spec, with row counts, per time bucket.

Partials hold (`__segment`, `__bucket` ms, `dimension`, `value`, `count`) for every matching value,
not truncated: a segment cannot know the global top `limit`. Merge sums counts per
(bucket, dimension, value); finalize sorts each bucket's hits by the query's string ordering (then
dimension name) and applies `limit`, as Druid's SearchBinaryFn does. With granularity `all` the
bucket is the start of the earliest segment slice read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Self

import pyarrow as pa
import pyarrow.compute as pc

from strata.query.base import SEGMENT_COLUMN, CommonFields, Query, register
from strata.query.cache_key import to_json_bytes
from strata.query.errors import QueryUnsupported, invalid
from strata.query.fields import JAVA_INT_MAX, as_object, get_int, get_list
from strata.query.filters import Filter, parse_filter
from strata.query.search_spec import SearchSpec, parse_search_spec
from strata.query.string_comparators import LEXICOGRAPHIC, parse_ordering, sort_key
from timeline import Granularity, format_instant

if TYPE_CHECKING:
    pass

BUCKET = "__bucket"
DEFAULT_LIMIT = 1000
PARTIAL_SCHEMA = pa.schema(
    [
        (SEGMENT_COLUMN, pa.string()),
        (BUCKET, pa.int64()),
        ("dimension", pa.string()),
        ("value", pa.string()),
        ("count", pa.int64()),
    ]
)


@dataclass(frozen=True, slots=True)
class SearchDimension:
    column: str
    output_name: str


def _parse_dimension(value: Any) -> SearchDimension:
    if isinstance(value, str):
        return SearchDimension(value, value)
    spec = as_object(value, "searchDimensions entry")
    if spec.get("type", "default") != "default" or spec.get("extractionFn") is not None:
        raise QueryUnsupported(f"search dimension spec [{spec.get('type')}] is not supported")
    column = spec.get("dimension")
    if not isinstance(column, str) or not column:
        raise invalid("searchDimensions entry needs a [dimension]")
    output = spec.get("outputName") or column
    return SearchDimension(column, str(output))


@register
@dataclass(frozen=True, kw_only=True)
class SearchQuery(Query):
    query_type = "search"

    dimensions: tuple[SearchDimension, ...] | None  # None: every dimension of each segment
    spec: SearchSpec
    sort: str = LEXICOGRAPHIC
    limit: int = DEFAULT_LIMIT
    granularity: Granularity
    filter: Filter | None = None

    @classmethod
    def from_json(cls, obj: Mapping[str, Any], common: CommonFields) -> Self:
        what = "search query"
        raw_dims = get_list(obj, "searchDimensions", None, what=what)
        if obj.get("query") is None:
            raise invalid("Missing required field [query] of search query")
        sort = obj.get("sort")
        try:
            granularity = Granularity.parse(obj.get("granularity", "all"))
        except ValueError as e:
            raise invalid("Invalid granularity: %s", e) from None
        return cls(
            **common.as_kwargs(),
            dimensions=None if raw_dims is None else tuple(_parse_dimension(d) for d in raw_dims),
            spec=parse_search_spec(obj["query"], "search query [query]"),
            sort=LEXICOGRAPHIC if sort is None else parse_ordering(sort),
            limit=get_int(obj, "limit", DEFAULT_LIMIT, what=what, minimum=0, maximum=JAVA_INT_MAX),
            granularity=granularity,
            filter=parse_filter(obj.get("filter")),
        )

    def to_json(self) -> dict[str, Any]:
        out = self.common_json()
        out.update(self._spec_json())
        out["sort"] = {"type": self.sort}
        out["limit"] = self.limit
        return out

    def _spec_json(self) -> dict[str, Any]:
        dims = None
        if self.dimensions is not None:
            dims = [
                {"type": "default", "dimension": d.column, "outputName": d.output_name}
                for d in self.dimensions
            ]
        return {
            "searchDimensions": dims,
            "query": self.spec.to_json(),
            "granularity": self.granularity.to_json(),
            "filter": None if self.filter is None else self.filter.to_json(),
        }

    def cache_key(self) -> bytes:
        # Partials are untruncated and unsorted, so sort and limit do not belong in the key.
        return self.query_type.encode() + b":" + to_json_bytes(self._spec_json())

    # -- merge and finalize (the pass over segment rows: strata.engine.search) ---------------------
    def merge(self, partials: Sequence[pa.Table]) -> pa.Table:
        tables = [p.select(PARTIAL_SCHEMA.names).cast(PARTIAL_SCHEMA) for p in partials if p.num_rows]
        if not tables:
            return PARTIAL_SCHEMA.empty_table()
        merged = pa.concat_tables(tables)
        if self.granularity.is_all:  # one bucket: the earliest start read
            first = pc.min(merged.column(BUCKET))
            merged = merged.set_column(1, BUCKET, pa.array([first.as_py()] * merged.num_rows, pa.int64()))
        summed = sum_counts(merged, [BUCKET, "dimension", "value"])
        segment = pa.nulls(summed.num_rows, pa.string())
        return summed.add_column(0, SEGMENT_COLUMN, segment).select(PARTIAL_SCHEMA.names)

    def finalize(self, merged: pa.Table) -> list[Any]:
        value_key = sort_key(self.sort)
        dim_key = sort_key(LEXICOGRAPHIC)
        by_bucket: dict[int, list[tuple[str, str, int]]] = {}
        columns = [merged.column(c).to_pylist() for c in (BUCKET, "dimension", "value", "count")]
        for bucket, dim, value, count in zip(*columns, strict=True):
            by_bucket.setdefault(bucket, []).append((dim, value, count))
        out = []
        for bucket in sorted(by_bucket):
            hits = sorted(by_bucket[bucket], key=lambda h: (value_key(h[1]), dim_key(h[0])))[: self.limit]
            out.append(
                {
                    "timestamp": format_instant(bucket, self.granularity.tz),
                    "result": [{"dimension": d, "value": v, "count": c} for d, v, c in hits],
                }
            )
        return out


def sum_counts(table: pa.Table, keys: list[str]) -> pa.Table:
    summed = table.group_by(keys, use_threads=False).aggregate([("count", "sum")])
    return summed.rename_columns([*keys, "count"])
