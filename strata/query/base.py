"""The query model's common part and the registry of query types.

A query is immutable data parsed from Druid's JSON. Each query type module subclasses `Query`
and registers itself; `parse_query` dispatches on `queryType`. The data paths of a query type are:

    partials (data node, per segment: strata.engine)  ->  merge (broker or data node, Arrow)
        ->  finalize (post-aggregators, ordering, limits, Druid's JSON shape)

Partials are Arrow tables with a `__segment` column so a broker can cache each segment's part.
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Self

from strata.query.cache_key import to_json_bytes
from strata.query.context import QueryContext
from strata.query.data_source import (
    DataSource,
    QuerySource,
    TableSource,
    leaf,
    parse_data_source,
    routing_table,
)
from strata.query.errors import QueryUnsupported, invalid
from strata.query.fields import as_object
from strata.query.json_text import answer_json
from strata.query.segment_spec import QuerySegmentSpec, parse_segment_spec

if TYPE_CHECKING:
    import pyarrow as pa

SEGMENT_COLUMN = "__segment"


@dataclass(frozen=True, kw_only=True)
class Query(ABC):
    query_type: ClassVar[str]
    # Druid caches per-segment results for most types; scan is in Druid's unCacheable list.
    segment_cacheable: ClassVar[bool] = True
    # A type whose partials the engine can merge in its one pass over segments may answer a broker
    # that does not cache them per segment with one merged partial (`__segment` null).
    node_may_merge: ClassVar[bool] = False
    # timeBoundary, segmentMetadata and dataSourceMetadata default to eternity in Druid.
    intervals_required: ClassVar[bool] = True

    data_source: str  # the table whose segments are read ("" for an inline or union dataSource)
    segment_spec: QuerySegmentSpec
    context: QueryContext
    # a `query` dataSource (under any unnest or join): the broker runs `inner` first, then this
    # query over its rows
    inner: Query | None = None
    source: DataSource | None = None  # the whole dataSource (None: the table `data_source`)

    @classmethod
    @abstractmethod
    def from_json(cls, obj: Mapping[str, Any], common: CommonFields) -> Self:
        """Parse the type-specific fields; `common` holds dataSource, intervals and context."""

    @abstractmethod
    def to_json(self) -> dict[str, Any]:
        """The complete query JSON (what a broker forwards to a data node)."""

    @abstractmethod
    def merge(self, partials: Sequence[pa.Table]) -> pa.Table:
        """Combine partials (from any mix of segments) into one partial; associative."""

    @abstractmethod
    def finalize(self, merged: pa.Table) -> list[Any]:
        """Turn a merged partial into Druid's JSON response (post-aggregators, order, limits)."""

    def merge_gathered(self, partials: Sequence[pa.Table], *, one_node_merged: bool) -> pa.Table:
        """`merge` of what a broker gathered; `one_node_merged`: the partials are one table a data
        node merged over all its segments (its keys distinct), which a type may take as it is."""
        return self.merge(partials)

    def finalize_json(self, merged: pa.Table) -> bytes:
        """`finalize`'s rows as the JSON answer's bytes (a type may write them without the rows)."""
        return answer_json(self.finalize(merged))

    def cache_key(self) -> bytes:
        """Bytes covering everything that changes one segment's partial, nothing else."""
        raise NotImplementedError(f"{self.query_type} has no cache key")

    # -- helpers shared by every type --------------------------------------------------------------
    @property
    def data_source_spec(self) -> DataSource:
        return self.source if self.source is not None else TableSource(self.data_source)

    @property
    def plain_table(self) -> bool:
        """The rows are a table's own, unwrapped: what answers from footers and announced facts need."""
        return self.source is None and self.inner is None

    def source_key(self) -> bytes:
        """What a per-segment cache key adds for a dataSource other than a table: the datasource
        changes each segment's partial (an unnest, a join's right rows)."""
        source = self.data_source_spec
        return b"" if isinstance(source, TableSource) else b"|" + to_json_bytes(source.to_json())

    def common_json(self) -> dict[str, Any]:
        return {
            "queryType": self.query_type,
            "dataSource": self.data_source_spec.to_json(),
            "intervals": self.segment_spec.to_json(),
            "context": self.context.to_json(),
        }

    def with_segment_spec(self, spec: QuerySegmentSpec) -> Self:
        return dataclasses.replace(self, segment_spec=spec)

    def with_context(self, context: QueryContext) -> Self:
        return dataclasses.replace(self, context=context)


@dataclass(frozen=True, slots=True)
class CommonFields:
    data_source: str
    segment_spec: QuerySegmentSpec
    context: QueryContext
    inner: Query | None = None
    source: DataSource | None = None

    def as_kwargs(self) -> dict[str, Any]:
        return {
            "data_source": self.data_source,
            "segment_spec": self.segment_spec,
            "context": self.context,
            "inner": self.inner,
            "source": self.source,
        }


_QUERY_TYPES: dict[str, type[Query]] = {}


def register(cls: type[Query]) -> type[Query]:
    """Class decorator adding a query type to the registry under its `query_type`."""
    _QUERY_TYPES[cls.query_type] = cls
    return cls


def query_types() -> Mapping[str, type[Query]]:
    return dict(_QUERY_TYPES)


def parse_query(obj: Any) -> Query:
    """Parse and validate a native query; every problem is an `InvalidInput` naming the field."""
    import strata.query.all_types  # noqa: F401 - registers every query type

    obj = as_object(obj, "query")
    query_type = obj.get("queryType")
    if not isinstance(query_type, str):
        raise invalid("Missing required field [queryType]")
    cls = _QUERY_TYPES.get(query_type)
    if cls is None:
        known = ", ".join(sorted(_QUERY_TYPES))
        raise invalid("Unknown queryType [%s]; known types: %s", query_type, known)
    intervals = obj.get("intervals")
    if intervals is None and not cls.intervals_required:
        from strata.query.segment_spec import IntervalsSpec
        from timeline import ETERNITY

        spec: QuerySegmentSpec = IntervalsSpec((ETERNITY,))
    else:
        spec = parse_segment_spec(intervals)
    source = parse_data_source(obj.get("dataSource"), parse_query)
    base = leaf(source)
    inner = base.query if isinstance(base, QuerySource) else None
    if inner is not None and cls.query_type not in QUERY_DATASOURCE_TYPES:
        raise QueryUnsupported(f"A query dataSource under a [{cls.query_type}] query is not supported")
    common = CommonFields(
        data_source=routing_table(source),
        segment_spec=spec,
        context=QueryContext.parse(obj.get("context")),
        inner=inner,
        source=None if isinstance(source, TableSource) else source,
    )
    return cls.from_json(obj, common)


# outer query types the broker evaluates over a subquery's rows (Druid's common nested shapes)
QUERY_DATASOURCE_TYPES = frozenset({"groupBy", "timeseries", "topN", "scan"})


Parser = Callable[[Mapping[str, Any], CommonFields], Query]
