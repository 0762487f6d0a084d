"""The topN query: the top `threshold` dimension values per time bucket by a metric.

As Druid, it is approximate across segments: each segment keeps its best
max(threshold, minTopNThreshold) values per bucket (Druid: the broker's
`TopNQueryQueryToolChest.ThresholdAdjustingQueryRunner` raises the threshold the data nodes get,
`TopNQueryEngine` cuts each segment to it, ties as `segment_cut` keeps them), the kept values are
summed and ranked again, ties by the dimension value (lexicographic, nulls first). Every bucket a
segment's cursor walks is answered, with an empty list where no row matched. Whatever sums the
per-segment cuts (a data node's one merged partial, the broker over cached and fetched partials)
does not cut again before the broker's final ranking, so the answer depends neither on the cache
nor on which node serves which segment (Druid's `TopNBinaryFn` also re-cuts every pairwise merge,
an order-dependent step left out on purpose: docs/query-api.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Self

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from strata.query.aggregation_engine import BUCKET, GroupingPlan, agg_col, dim_col, rank_value_sql
from strata.query.aggregators import Aggregator, json_values, parse_aggregators
from strata.query.aggregators.simple import CountAggregator
from strata.query.base import SEGMENT_COLUMN, CommonFields, Query, register
from strata.query.cache_key import digest_key
from strata.query.columns import SEGMENT_INDEX
from strata.query.dimensions import DimensionSpec, parse_dimension_spec
from strata.query.duck import connection
from strata.query.errors import invalid
from strata.query.fields import JAVA_INT_MAX, get_int
from strata.query.filters import Filter, parse_filter
from strata.query.granularity_sql import parse_query_granularity
from strata.query.orderings import group_positions, ordinal, segment_codes
from strata.query.post_aggregators import PostAggregator, compute_all, parse_post_aggregators
from strata.query.segment_cut import segment_cut
from strata.query.topn_metric import (
    InvertedMetric,
    TopNMetric,
    after_previous_stop,
    metric_name,
    parse_topn_metric,
    rank_key,
)
from strata.query.virtual_columns import NO_VIRTUAL_COLUMNS, VirtualColumns, parse_virtual_columns
from timeline import Granularity, format_instant

if TYPE_CHECKING:
    pass


ROWS = "__rows"
TOP_N_AGGREGATE_LIMIT = 1_000_000  # DuckDB's max(value, n) takes n below this


def _first_of_each(table: pa.Table, keys: list[str]) -> list[int]:
    """Index of the first row of each distinct `keys` combination."""
    seen: dict[tuple[Any, ...], int] = {}
    for i, key in enumerate(zip(*(table.column(k).to_pylist() for k in keys), strict=True)):
        seen.setdefault(key, i)
    return list(seen.values())


def _most_per_bucket(table: pa.Table) -> int:
    return int(pc.max(pc.value_counts(table.column(BUCKET)).field("counts")).as_py())


@register
@dataclass(frozen=True, kw_only=True)
class TopNQuery(Query):
    query_type = "topN"
    node_may_merge = True  # when the broker caches nothing: one partial, the per-segment cuts summed

    dimension: DimensionSpec
    metric: TopNMetric
    threshold: int
    granularity: Granularity
    filter: Filter | None = None
    virtual_columns: VirtualColumns = NO_VIRTUAL_COLUMNS
    aggregations: tuple[Aggregator, ...] = ()
    post_aggregations: tuple[PostAggregator, ...] = ()

    @classmethod
    def from_json(cls, obj: Mapping[str, Any], common: CommonFields) -> Self:
        what = "topN query"
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
            virtual_columns=parse_virtual_columns(obj, what),
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
                "virtualColumns": self.virtual_columns.to_json(),
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
                "partial": 2,  # partials carry the hidden row count and empty-bucket markers
                "granularity": self.granularity.to_json(),
                "filter": None if self.filter is None else self.filter.to_json(),
                "virtualColumns": self.virtual_columns.to_json(),
                "aggregations": [a.to_json() for a in self.aggregations],
                # a post-aggregator ranks segments' values only when it is the metric
                "postAggregations": [p.to_json() for p in self.post_aggregations] if post_used else [],
            },
        )

    @property
    def plan(self) -> GroupingPlan:
        # a hidden row count, last, tells real groups (>= 1) from empty-bucket markers (null)
        aggs = (*self.aggregations, CountAggregator(ROWS))
        return GroupingPlan(
            self.granularity, (self.dimension,), aggs, self.filter, self.virtual_columns, source=self.source
        )

    @property
    def _rows_col(self) -> str:
        return agg_col(len(self.aggregations))

    @property
    def segment_keep(self) -> int:
        return max(self.threshold, self.context.min_topn_threshold)

    # -- per segment: what the engine (strata.engine.topn) applies to its grouped rows --------
    def with_markers(self, table: pa.Table, frame: pa.Table) -> pa.Table:
        """Add a marker row (dimension and aggregates null) for each segment bucket a cursor walked
        without a matching row: Druid answers such buckets with an empty list. Under `all` each
        partial keeps its own segment's cursor start (merging takes the earliest, matched or not,
        as Druid stamps the answer): it is cached and reused by queries over other segments."""
        keys = [SEGMENT_COLUMN, BUCKET]
        if frame.num_rows == 0:
            return table
        present = table.select(keys).group_by(keys).aggregate([])
        missing = frame.join(present, keys=keys, join_type="left anti")
        columns = {f.name: pa.nulls(missing.num_rows, f.type) for f in table.schema}
        columns.update({k: missing.column(k) for k in keys})
        return pa.concat_tables([table, pa.table(columns).cast(table.schema)])

    def _rank_value_sql(self) -> str | None:
        name = metric_name(self.metric)
        if name is None or self.dimension.output_type != "STRING":
            return None
        # None when ranked by a post-aggregator, or by a value SQL would rank differently
        return rank_value_sql(self.aggregations, name)

    @property
    def cuts_in_sql(self) -> bool:
        """Whether `cut_sql` ranks in DuckDB (its output then needs no `top`): a count or long/double
        sum/min/max metric, descending, over a string dimension, a cut within DuckDB's top-n
        aggregate."""
        return (
            self._rank_value_sql() is not None
            and not isinstance(self.metric, InvertedMetric)
            and self.segment_keep < TOP_N_AGGREGATE_LIMIT
        )

    def cut_sql(self, grouped: str) -> str | None:
        """`grouped` (SQL of per-segment grouped rows) cut to the rows Druid keeps of each segment
        bucket (`segment_cut`), in DuckDB where `cuts_in_sql`; else None (`top` cuts in numpy).

        The keep-th best value of each partition (a top-n aggregate) splits the groups: the better
        ones all stay; of the ones equal to it (or null, when fewer values than `segment_keep`
        exist), those among the first `segment_keep` better-or-tied rows in dimension order, and of
        these the largest that fit.
        """
        value = self._rank_value_sql()
        if value is None or not self.cuts_in_sql:
            return None
        by, keep, dim = f"{SEGMENT_INDEX}, {BUCKET}", self.segment_keep, dim_col(0)
        better = f"((c.__cut IS NULL AND {value} IS NOT NULL) OR {value} > c.__cut)"
        tied = f"((c.__cut IS NULL AND {value} IS NULL) OR {value} = c.__cut)"
        return (
            f"WITH g AS MATERIALIZED ({grouped}), "
            # each partition's best `keep` non-null values, descending (a top-n aggregate)
            f"b AS (SELECT {by}, max({value}, {keep}) AS __best FROM g GROUP BY {by}), "
            f"c AS (SELECT {by}, __best[{keep}] AS __cut, CASE WHEN __best[{keep}] IS NULL "
            f"THEN coalesce(len(__best), 0) ELSE len(list_filter(__best, lambda x: x > __best[{keep}])) "
            f"END AS __better FROM b) "
            f"SELECT g.* FROM g JOIN c USING ({by}) WHERE {better} "
            f"UNION ALL (SELECT * EXCLUDE (__tied, __room, __walked) FROM (SELECT g.*, {tied} AS __tied, "
            f"{keep} - c.__better AS __room, row_number() OVER (PARTITION BY {by} ORDER BY {dim} ASC "
            f"NULLS FIRST) AS __walked FROM g JOIN c USING ({by}) WHERE {better} OR {tied}) "
            f"WHERE __tied AND __walked <= {keep} "
            f"QUALIFY row_number() OVER (PARTITION BY {by} ORDER BY {dim} DESC NULLS LAST) <= __room)"
        )

    def rank_column(self) -> str | None:
        """The intermediate column `cut_sql` ranks by (its value as a double, NaN as null), where
        it ranks descending; None where it ranks inverted, or does not cut in SQL."""
        name = metric_name(self.metric)
        if self._rank_value_sql() is None or isinstance(self.metric, InvertedMetric):
            return None
        return agg_col(next(i for i, a in enumerate(self.aggregations) if a.name == name))

    def merge(self, partials: Sequence[pa.Table]) -> pa.Table:
        return self.cut(self.plan.merge(connection(), partials), self.segment_keep)

    def summed(self, conn: duckdb.DuckDBPyConnection, partials: pa.Table) -> pa.Table:
        """Per-segment partials summed into one (`__segment` null), not cut: what a data node ships
        instead of them. Cutting the sums would rank over the node's share of the segments."""
        return self.plan.merge(conn, [partials])

    def cut(self, table: pa.Table, keep: int) -> pa.Table:
        """A merged partial's best `keep` rows per bucket, in no particular order: as it is when no
        bucket holds more (a partial's order does not matter, so nothing is sorted), else `top`."""
        markers = table.column(self._rows_col).null_count if table.num_rows else 1
        if not markers and (table.num_rows <= keep or _most_per_bucket(table) <= keep):
            return table
        return self.top(table, keep, per_segment=False)

    def top(self, table: pa.Table, keep: int, *, per_segment: bool) -> pa.Table:
        """The best `keep` rows of each (segment,) bucket, in rank order (per segment: the rows
        Druid keeps, `segment_cut`); markers of buckets with no kept row stay (one per bucket),
        after the ranked rows."""
        if table.num_rows == 0:
            return table
        is_marker = pc.is_null(table.column(self._rows_col))
        if pc.any(is_marker).as_py():
            ranked = self.top(table.filter(pc.invert(is_marker)), keep, per_segment=per_segment)
            where = [SEGMENT_COLUMN, BUCKET] if per_segment else [BUCKET]
            markers = table.filter(is_marker)
            markers = markers.take(pa.array(_first_of_each(markers, where), pa.int64()))
            markers = markers.join(ranked.select(where).group_by(where).aggregate([]), keys=where,
                                   join_type="left anti").select(table.schema.names)  # fmt: skip
            return pa.concat_tables([ranked, markers.cast(table.schema)])
        dims = table.column(dim_col(0))
        stop_mask = after_previous_stop(self.metric, dims)
        if stop_mask is not None and not pc.all(stop_mask).as_py():
            # rows up to `previousStop` leave as markers: a bucket they empty is still answered
            passed = table.filter(stop_mask)
            stopped = table.filter(pc.invert(stop_mask))
            where = [SEGMENT_COLUMN, BUCKET] if per_segment else [BUCKET]
            blank = {f.name: pa.nulls(stopped.num_rows, f.type) for f in table.schema}
            markers = pa.table({**blank, **{k: stopped.column(k) for k in where}}, schema=table.schema)
            return self.top(pa.concat_tables([passed, markers]), keep, per_segment=per_segment)
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
        if per_segment:  # Druid's cut of each segment bucket, ties as its engine breaks them
            groups = np.unique(np.column_stack(keys[2:]), axis=0, return_inverse=True)[1].reshape(-1)
            kept = order[segment_cut(groups, keys[1], keys[0], keep)[order]]
        else:  # the final ranking: ties by value, as Druid's broker orders its merged list
            kept = order[group_positions([k[order] for k in keys[2:]]) < keep]
        return table.take(pa.array(kept, pa.int64()))

    def finalize(self, merged: pa.Table) -> list[Any]:
        top = self.top(merged, self.threshold, per_segment=False)
        if top.num_rows == 0:
            return []
        real = top.column(self._rows_col).is_valid().to_pylist()
        env = self.plan.env(top)
        columns: dict[str, list[Any]] = {self.dimension.output_name: json_values(top.column(dim_col(0)))}
        columns.update(self.plan.aggregator_json(top, env, self.context.finalize))
        columns.pop(ROWS, None)
        for pname, values in compute_all(self.post_aggregations, env).items():
            columns[pname] = json_values(values)
        names = list(columns)
        entries = [dict(zip(names, vals, strict=True)) for vals in zip(*columns.values(), strict=True)]
        tz = self.granularity.tz
        buckets: dict[int, list[Any]] = {}
        for ms, entry, is_real in zip(top.column(BUCKET).to_pylist(), entries, real, strict=True):
            bucket = buckets.setdefault(ms, [])
            if is_real:
                bucket.append(entry)
        ordered = sorted(buckets.items())
        return [{"timestamp": format_instant(ms, tz), "result": result} for ms, result in ordered]
