"""The topN query: the top `threshold` dimension values per time bucket by a metric.

As Druid, it is approximate across segments: each segment keeps its best
max(threshold, minTopNThreshold) values per bucket, the broker combines equal values, re-ranks
and trims. Ties rank by the dimension value (lexicographic, nulls first) so results are stable.
Buckets with no rows produce no result entry. A data node answering a client directly ranks
over all its segments at once (`run_merged`), which is exact: Druid's per-segment trimming only
ever loses accuracy, and a broker (which caches per segment) still gets the trimmed partials.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Self

import numpy as np
import pyarrow as pa

from query.aggregation_engine import BUCKET, GroupingPlan, dim_col, rank_value_sql
from query.aggregators import Aggregator, json_values, parse_aggregators
from query.base import SEGMENT_COLUMN, CommonFields, Query, register
from query.cache_key import digest_key
from query.dimensions import DimensionSpec, parse_dimension_spec
from query.duck import connection
from query.errors import invalid
from query.fields import JAVA_INT_MAX, get_int
from query.filters import Filter, parse_filter
from query.granularity_sql import parse_query_granularity
from query.orderings import group_positions, ordinal, segment_codes
from query.post_aggregators import PostAggregator, compute_all, parse_post_aggregators
from query.segment_input import SEGMENT_INDEX, SegmentInput
from query.timeseries import reject_virtual_columns
from query.topn_metric import (
    InvertedMetric,
    TopNMetric,
    after_previous_stop,
    metric_name,
    parse_topn_metric,
    rank_key,
)
from timeline import Granularity, format_instant

if TYPE_CHECKING:
    import duckdb


@register
@dataclass(frozen=True, kw_only=True)
class TopNQuery(Query):
    query_type = "topN"
    node_may_merge = True  # when the broker caches nothing: one partial, trimmed as Druid's historicals do

    dimension: DimensionSpec
    metric: TopNMetric
    threshold: int
    granularity: Granularity
    filter: Filter | None = None
    aggregations: tuple[Aggregator, ...] = ()
    post_aggregations: tuple[PostAggregator, ...] = ()

    @classmethod
    def from_json(cls, obj: Mapping[str, Any], common: CommonFields) -> Self:
        what = "topN query"
        reject_virtual_columns(obj, what)
        if obj.get("dimension") is None:
            raise invalid("Missing required field [dimension] of topN query")
        if obj.get("metric") is None:
            raise invalid("Missing required field [metric] of topN query")
        dimension = parse_dimension_spec(obj["dimension"], "dimension of topN query")
        aggs = parse_aggregators(obj)
        posts = parse_post_aggregators(obj, [a.name for a in aggs])
        names = [a.name for a in aggs] + [p.name for p in posts]
        if dimension.output_name in names:
            raise invalid("[%s] already defined", dimension.output_name)
        return cls(
            **common.as_kwargs(),
            dimension=dimension,
            metric=parse_topn_metric(obj["metric"], names),
            threshold=get_int(obj, "threshold", what=what, minimum=1, maximum=JAVA_INT_MAX),
            granularity=parse_query_granularity(obj.get("granularity")),
            filter=parse_filter(obj.get("filter")),
            aggregations=aggs,
            post_aggregations=posts,
        )

    def to_json(self) -> dict[str, Any]:
        out = self.common_json()
        out.update(
            {
                "dimension": self.dimension.to_json(),
                "metric": self.metric.to_json(),
                "threshold": self.threshold,
                "granularity": self.granularity.to_json(),
                "filter": None if self.filter is None else self.filter.to_json(),
                "aggregations": [a.to_json() for a in self.aggregations],
                "postAggregations": [p.to_json() for p in self.post_aggregations],
            }
        )
        return out

    def cache_key(self) -> bytes:
        ranked_by = metric_name(self.metric)
        post_used = any(p.name == ranked_by for p in self.post_aggregations)
        return digest_key(
            self.query_type,
            {
                "dimension": self.dimension.to_json(),
                "metric": self.metric.to_json(),
                "threshold": self.threshold,
                "keep": self.segment_keep,
                "granularity": self.granularity.to_json(),
                "filter": None if self.filter is None else self.filter.to_json(),
                "aggregations": [a.to_json() for a in self.aggregations],
                # a post-aggregator ranks segments' values only when it is the metric
                "postAggregations": [p.to_json() for p in self.post_aggregations] if post_used else [],
            },
        )

    @property
    def plan(self) -> GroupingPlan:
        return GroupingPlan(self.granularity, (self.dimension,), self.aggregations, self.filter)

    @property
    def segment_keep(self) -> int:
        return max(self.threshold, self.context.min_topn_threshold)

    # -- data path ---------------------------------------------------------------------------------
    def run_partials(self, conn: duckdb.DuckDBPyConnection, inputs: Sequence[SegmentInput]) -> pa.Table:
        cut = self._segment_cut_sql()
        return self._top(self.plan.run(conn, inputs, qualify=cut), self.segment_keep, per_segment=True)

    def _segment_cut_sql(self) -> str | None:
        """Each segment's best `segment_keep` rows per bucket as a DuckDB QUALIFY, when SQL ranks
        exactly as `_top` does: a count or long/double sum/min/max metric over a string dimension.

        The grouping then ships only what survives, and `_top` re-ranks that small remainder.
        """
        name = metric_name(self.metric)
        if name is None or self.dimension.output_type != "STRING":
            return None
        value = rank_value_sql(self.aggregations, name)
        if value is None:
            return None  # ranked by a post-aggregator, or a value SQL would rank differently
        direction = "ASC NULLS FIRST" if isinstance(self.metric, InvertedMetric) else "DESC NULLS LAST"
        return (
            f"row_number() OVER (PARTITION BY {SEGMENT_INDEX}, {BUCKET} "
            f"ORDER BY {value} {direction}, {dim_col(0)} ASC NULLS FIRST) <= {self.segment_keep}"
        )

    def run_merged(self, conn: duckdb.DuckDBPyConnection, inputs: Sequence[SegmentInput]) -> pa.Table:
        """Ranks over all of `inputs` at once: exact, where per-segment trimming may drop values."""
        merged = self.plan.run_merged(conn, inputs)
        return self._top(merged, self.segment_keep, per_segment=False)

    def merge(self, partials: Sequence[pa.Table]) -> pa.Table:
        merged = self.plan.merge(connection(), partials)
        return self._top(merged, self.segment_keep, per_segment=False)

    def _top(self, table: pa.Table, keep: int, *, per_segment: bool) -> pa.Table:
        """The best `keep` rows of each (segment,) bucket, in rank order."""
        if table.num_rows == 0:
            return table
        dims = table.column(dim_col(0))
        stop_mask = after_previous_stop(self.metric, dims)
        if stop_mask is not None:
            table = table.filter(stop_mask)
            dims = table.column(dim_col(0))
        name = metric_name(self.metric)
        values = None
        if name is not None:
            env = self.plan.env(table)
            if name not in env.final:
                compute_all(self.post_aggregations, env)
            values = env.final[name]
        keys = [ordinal(dims), rank_key(self.metric, values, dims), table.column(BUCKET).to_numpy()]
        if per_segment:
            keys.append(segment_codes(table.column(SEGMENT_COLUMN)))
        order = np.lexsort(keys)
        group_keys = [k[order] for k in keys[2:]]
        kept = order[group_positions(group_keys) < keep]
        return table.take(pa.array(kept, pa.int64()))

    def finalize(self, merged: pa.Table) -> list[Any]:
        top = self._top(merged, self.threshold, per_segment=False)
        if top.num_rows == 0:
            return []
        env = self.plan.env(top)
        columns: dict[str, list[Any]] = {self.dimension.output_name: json_values(top.column(dim_col(0)))}
        columns.update(self.plan.aggregator_json(top, env, self.context.finalize))
        for pname, values in compute_all(self.post_aggregations, env).items():
            columns[pname] = json_values(values)
        names = list(columns)
        entries = [dict(zip(names, vals, strict=True)) for vals in zip(*columns.values(), strict=True)]
        out: list[Any] = []
        tz = self.granularity.tz
        for ms, entry in zip(top.column(BUCKET).to_pylist(), entries, strict=True):
            if not out or out[-1][0] != ms:
                out.append((ms, []))
            out[-1][1].append(entry)
        return [{"timestamp": format_instant(ms, tz), "result": result} for ms, result in out]
