"""The groupBy query: aggregates per (time bucket, dimension values), then having and limitSpec.

Per-segment partials group by segment too; merging combines equal keys across segments. Druid's
broker never caches groupBy per segment (apache/druid#3820), so `segment_cacheable` is False, but
partials still come back per segment for the merge. Rows print as
`{"version":"v1","timestamp","event":{dims..., aggs..., postAggs...}}`, or as arrays with context
`resultAsArray` (the timestamp first unless granularity is `all`). With granularity `all` every
row is stamped with the first query interval's start.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import repeat
from typing import TYPE_CHECKING, Any, Self

import numpy as np
import pyarrow as pa

from strata.query.aggregation_engine import BUCKET, GroupingPlan, dim_col, null_row
from strata.query.aggregators import Aggregator, json_values, parse_aggregators
from strata.query.base import CommonFields, Query, register
from strata.query.cache_key import digest_key
from strata.query.collector import collector_paused
from strata.query.dimensions import COMPLEX_JSON, DimensionSpec, parse_dimension_spec
from strata.query.druid_types import json_value
from strata.query.duck import connection
from strata.query.errors import invalid
from strata.query.fields import get_bool, get_list
from strata.query.filters import Filter, parse_filter
from strata.query.granularity_sql import parse_query_granularity
from strata.query.having import Having, parse_having
from strata.query.json_text import (
    ROWS_PER_PASS,
    answer_json,
    column_texts,
    json_array,
    python_texts,
    rows_text,
    separated,
    slice_texts,
)
from strata.query.limit_spec import LimitSpec, parse_limit_spec
from strata.query.post_aggregators import PostAggregator, compute_all, parse_post_aggregators
from strata.query.virtual_columns import NO_VIRTUAL_COLUMNS, VirtualColumns, parse_virtual_columns
from timeline import Granularity, format_instant

if TYPE_CHECKING:
    pass

FORCE_LIMIT_PUSH_DOWN = "forceLimitPushDown"  # context: push the limit down even when ranking by aggregators
APPLY_LIMIT_PUSH_DOWN = "applyLimitPushDown"  # context: false keeps every group on the data nodes


@register
@dataclass(frozen=True, kw_only=True)
class GroupByQuery(Query):
    query_type = "groupBy"
    segment_cacheable = False
    node_may_merge = True

    dimensions: tuple[DimensionSpec, ...]
    granularity: Granularity
    filter: Filter | None = None
    virtual_columns: VirtualColumns = NO_VIRTUAL_COLUMNS
    aggregations: tuple[Aggregator, ...] = ()
    post_aggregations: tuple[PostAggregator, ...] = ()
    having: Having | None = None
    limit_spec: LimitSpec = field(default_factory=LimitSpec)
    subtotals: tuple[tuple[str, ...], ...] | None = None  # subtotalsSpec: dimension output names

    @classmethod
    def from_json(cls, obj: Mapping[str, Any], common: CommonFields) -> Self:
        what = "groupBy query"
        dims = tuple(
            parse_dimension_spec(d, "dimension of groupBy query")
            for d in get_list(obj, "dimensions", [], what=what)
        )
        aggs = parse_aggregators(obj)
        posts = parse_post_aggregators(obj, [a.name for a in aggs])
        names = [d.output_name for d in dims] + [a.name for a in aggs] + [p.name for p in posts]
        for i, n in enumerate(names):
            if n in names[:i]:
                raise invalid("Duplicate output name [%s] in groupBy query", n)
        query = cls(
            **common.as_kwargs(),
            dimensions=dims,
            granularity=parse_query_granularity(obj.get("granularity")),
            filter=parse_filter(obj.get("filter")),
            virtual_columns=parse_virtual_columns(obj, what),
            aggregations=aggs,
            post_aggregations=posts,
            having=parse_having(obj.get("having")),
            limit_spec=parse_limit_spec(obj.get("limitSpec")),
            subtotals=_parse_subtotals(obj.get("subtotalsSpec"), [d.output_name for d in dims]),
        )
        query._forces_limit_push_down()  # Druid refuses a forced push-down it cannot apply
        return query

    def to_json(self) -> dict[str, Any]:
        out = self.common_json()
        out.update(
            {
                "dimensions": [d.to_json() for d in self.dimensions],
                "granularity": self.granularity.to_json(),
                "filter": None if self.filter is None else self.filter.to_json(),
                "virtualColumns": self.virtual_columns.to_json(),
                "aggregations": [a.to_json() for a in self.aggregations],
                "postAggregations": [p.to_json() for p in self.post_aggregations],
                "having": None if self.having is None else self.having.to_json(),
                "limitSpec": self.limit_spec.to_json(),
                "subtotalsSpec": None if self.subtotals is None else [list(s) for s in self.subtotals],
            }
        )
        return out

    def cache_key(self) -> bytes:
        return digest_key(
            self.query_type,
            {
                "dimensions": [d.to_json() for d in self.dimensions],
                "granularity": self.granularity.to_json(),
                "filter": None if self.filter is None else self.filter.to_json(),
                "virtualColumns": self.virtual_columns.to_json(),
                "aggregations": [a.to_json() for a in self.aggregations],
            },
        )

    @property
    def plan(self) -> GroupingPlan:
        return GroupingPlan(
            self.granularity,
            self.dimensions,
            self.aggregations,
            self.filter,
            self.virtual_columns,
            multi_value_unnesting=self.context.multi_value_unnesting,
            source=self.source,
        )

    # -- limit push-down: what a data node keeps of its merged partial -------------------------------
    def _forces_limit_push_down(self) -> bool:
        """Context `forceLimitPushDown`, checked as Druid checks it: a limit, no having, no ordering
        by a post-aggregator."""
        if not get_bool(self.context.raw, FORCE_LIMIT_PUSH_DOWN, False, what="context"):
            return False
        if self.limit_spec.limit is None:
            raise invalid("When forcing limit push down, the provided limit spec must have a limit.")
        if self.having is not None:
            raise invalid("Cannot force limit push down when a having spec is present.")
        posts = {p.name for p in self.post_aggregations}
        if any(c.column in posts for c in self.limit_spec.columns):
            raise invalid("Limit push down when sorting by a post aggregator is not supported.")
        return True

    @property
    def node_limit(self) -> int | None:
        """How many groups a data node keeps of its merged partial, ranked as the answer ranks them
        (Druid's limit push-down); None: all. Exact when the limitSpec orders by dimensions only and
        no having drops groups after the merge: a group among the answer's first is among its node's
        first too. Ordered by an aggregator only with `forceLimitPushDown`, Druid's approximation."""
        limit = self.limit_spec
        if self.subtotals is not None or limit.limit is None:
            return None
        if not self._forces_limit_push_down():
            if self.having is not None or not get_bool(
                self.context.raw, APPLY_LIMIT_PUSH_DOWN, True, what="context"
            ):
                return None
            names = {d.output_name for d in self.dimensions}
            if any(c.column not in names for c in limit.columns):
                return None
        return limit.offset + limit.limit

    def node_cut(self, merged: pa.Table) -> pa.Table:
        """A data node's merged partial cut to `node_limit` groups (unchanged without one)."""
        keep = self.node_limit
        if keep is None or merged.num_rows <= keep:
            return merged
        columns = {
            d.output_name: merged.column(dim_col(i)).combine_chunks() for i, d in enumerate(self.dimensions)
        }
        if any(c.column not in columns for c in self.limit_spec.columns):  # forced: by aggregators too
            columns.update(self.plan.env(merged, raw=False).final)
        times = None if self.granularity.is_all else np.asarray(merged.column(BUCKET).to_numpy(), np.int64)
        order = LimitSpec(self.limit_spec.columns, keep).order(
            times, columns, [d.output_name for d in self.dimensions], dims_first=self._dims_first
        )
        return merged.take(pa.array(order, pa.int64()))

    @property
    def _dims_first(self) -> bool:
        return get_bool(self.context.raw, "sortByDimsFirst", False, what="context")

    # -- merge and finalize (the pass over segment rows: strata.engine) ----------------------------
    def merge(self, partials: Sequence[pa.Table]) -> pa.Table:
        return self.plan.merge(connection(), partials)

    def merge_gathered(self, partials: Sequence[pa.Table], *, one_node_merged: bool) -> pa.Table:
        return self.plan.merge(connection(), partials, merged_apart=one_node_merged)

    def _summary_row_when_empty(self) -> bool:
        """Druid's summary row: with no dimensions and granularity `all`, zero rows still give one
        row (count 0, every other aggregator null), unless a limit of 0 or an offset drops it."""
        limit = self.limit_spec
        return not self.dimensions and self.granularity.is_all and limit.limit != 0 and limit.offset == 0

    def finalize(self, merged: pa.Table) -> list[Any]:
        if self.subtotals is not None:
            return self._finalize_subtotals(merged)
        times, outputs = self.output_columns(merged)
        with collector_paused():  # millions of new objects, no cycles among them
            values = {k: v if isinstance(v, list) else json_values(v) for k, v in outputs.items()}
            return self._rows(times, values)

    def finalize_json(self, merged: pa.Table) -> bytes:
        """The answer's JSON, the bytes of `finalize`'s rows, written from the Arrow columns
        (strata.query.json_text): no Python row for a million groups."""
        if self.subtotals is not None:
            return answer_json(self._finalize_subtotals(merged))
        times, outputs = self.output_columns(merged)
        passes = []
        for start in range(0, len(times), ROWS_PER_PASS):
            part = times[start : start + ROWS_PER_PASS]
            texts = {k: slice_texts(v, start, len(part)) for k, v in outputs.items()}
            passes.append(rows_text(self._row_pieces(part, texts), len(part)))
        return json_array(passes)

    def output_columns(self, merged: pa.Table) -> tuple[np.ndarray, dict[str, pa.Array | list[Any]]]:
        """Each row's bucket start and each output column (Arrow, or unfinalized Python values),
        having applied, in the limitSpec's order."""
        plan = self.plan
        if merged.num_rows == 0 and self._summary_row_when_empty():
            merged = null_row(plan.schema())
        env = plan.env(merged)
        posts = compute_all(self.post_aggregations, env)
        columns: dict[str, pa.Array] = {}
        for i, d in enumerate(self.dimensions):
            columns[d.output_name] = merged.column(dim_col(i)).combine_chunks()
        for a in self.aggregations:
            columns[a.name] = env.final[a.name]
        columns.update(posts)
        if self.granularity.is_all:
            start = self.segment_spec.intervals[0].start if self.segment_spec.intervals else 0
            times = np.full(merged.num_rows, start, dtype=np.int64)
        else:
            times = np.asarray(merged.column(BUCKET).to_numpy(), dtype=np.int64)
        if self.having is not None:
            keep = self.having.mask({**columns, "__time": pa.array(times)}, merged.num_rows)
            idx = np.flatnonzero(keep)
            columns = {k: v.take(pa.array(idx)) for k, v in columns.items()}
            merged, times = merged.take(pa.array(idx)), times[idx]
        order = self.limit_spec.order(
            None if self.granularity.is_all else times,
            columns,
            [d.output_name for d in self.dimensions],
            dims_first=self._dims_first,
        )
        picked = pa.array(order, pa.int64())
        merged, times = merged.take(picked), times[order]
        outputs: dict[str, pa.Array | list[Any]] = {}
        for i, d in enumerate(self.dimensions):
            outputs[d.output_name] = dimension_values(merged.column(dim_col(i)), d.output_type)
        outputs.update(plan.aggregator_outputs(merged, plan.env(merged), self.context.finalize))
        for name in posts:
            outputs[name] = columns[name].take(picked)
        return times, outputs

    def _finalize_subtotals(self, merged: pa.Table) -> list[Any]:
        """Druid's subtotalsSpec: the merged groups re-aggregated over each listed subset of the
        dimensions, one after the other, each with the query's having, ordering and limit."""
        assert self.subtotals is not None
        if merged.num_rows == 0 and self.dimensions:
            return []  # no groups, so no subtotals either: not even the grand total's summary row
        out: list[Any] = []
        positions = {d.output_name: i for i, d in enumerate(self.dimensions)}
        for subset in self.subtotals:
            keep = [positions[name] for name in subset]
            sub = dataclasses.replace(
                self, dimensions=tuple(self.dimensions[i] for i in keep), subtotals=None
            )
            columns: dict[str, Any] = {}
            for name in merged.column_names:
                if name.startswith("d") and name[1:].isdigit():
                    continue  # dimension columns: renumbered below
                columns[name] = merged.column(name)
            for j, i in enumerate(keep):
                columns[dim_col(j)] = merged.column(dim_col(i))
            out += sub.finalize(sub.merge([pa.table(columns)]))
        return out

    def _rows(self, times: np.ndarray, values: dict[str, list[Any]]) -> list[Any]:
        names = list(values)
        tuples = list(zip(*values.values(), strict=True)) if names else [() for _ in range(len(times))]
        if self.context.result_as_array:
            if self.granularity.is_all:
                return list(map(list, tuples))
            return [[ms, *t] for ms, t in zip(times.tolist(), tuples, strict=True)]
        events = list(map(dict, map(zip, repeat(names), tuples)))  # C loops: a dict per row
        tz = self.granularity.tz
        if self.granularity.is_all:
            stamp = format_instant(int(times[0]), tz) if len(times) else ""
            return [{"version": "v1", "timestamp": stamp, "event": e} for e in events]
        stamps = {ms: format_instant(ms, tz) for ms in np.unique(times).tolist()}
        return [
            {"version": "v1", "timestamp": stamps[ms], "event": e}
            for ms, e in zip(times.tolist(), events, strict=True)
        ]

    def _row_pieces(self, times: np.ndarray, texts: dict[str, pa.Array]) -> list[bytes | pa.Array]:
        """One row's JSON as constant texts and text columns, as `_rows` prints it."""
        values = list(texts.values())
        if self.context.result_as_array:
            items: list[bytes | pa.Array] = [] if self.granularity.is_all else [column_texts(pa.array(times))]
            items += values
            return [b"[", *separated(items, b","), b"]"]
        fields: list[bytes | pa.Array] = []
        for i, (name, text) in enumerate(texts.items()):
            fields += [(b"," if i else b"") + answer_json(name) + b":", text]
        return [b'{"version":"v1","timestamp":', self._stamps(times), b',"event":{', *fields, b"}}"]

    def _stamps(self, times: np.ndarray) -> bytes | pa.Array:
        tz = self.granularity.tz
        if self.granularity.is_all:
            return answer_json(format_instant(int(times[0]), tz) if len(times) else "")
        distinct, which = np.unique(times, return_inverse=True)
        stamps = python_texts([format_instant(ms, tz) for ms in distinct.tolist()])
        return stamps.take(pa.array(which.ravel(), pa.int64()))


def dimension_values(column: pa.ChunkedArray, output_type: str) -> pa.Array | list[Any]:
    """A dimension's values to print: a COMPLEX<json> one, grouped by its text, as the JSON values it
    holds (Python values); any other as its Arrow column."""
    if output_type == COMPLEX_JSON:
        return [json_value(COMPLEX_JSON, v) for v in column.to_pylist()]
    return column.combine_chunks()


def _parse_subtotals(value: Any, names: list[str]) -> tuple[tuple[str, ...], ...] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(s, list) for s in value):
        raise invalid("Field [subtotalsSpec] of groupBy query must be a list of lists of dimension names")
    out = []
    for subset in value:
        for name in subset:
            if name not in names:
                raise invalid("Subtotal spec %s refers to [%s], not a dimension of the query", subset, name)
        out.append(tuple(subset))
    return tuple(out)
