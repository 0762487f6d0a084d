"""groupBy limit push-down: what each data node keeps of its merged partial, as Druid decides it.

Ordered by dimensions only (no having), each node keeps the limitSpec's first `offset + limit`
groups and the answer is unchanged: checked against DuckDB SQL over the raw rows with the hourly
wikipedia segments split over three "nodes" (each one merged partial, as a broker caching nothing
asks for). Ordered by an aggregator the limit stays on the broker, unless context
`forceLimitPushDown` asks for Druid's approximation: each node ranks its own groups, which hand-made
partials show. A forced push-down Druid cannot apply is refused with Druid's messages.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pytest

from strata.engine import run_merged
from strata.engine.segment_input import SegmentInput
from strata.query import parse_query
from strata.query.errors import InvalidInput
from strata.query.groupby import GroupByQuery
from tests.query.aggregation_helpers import oracle
from tests.query.segment_fixtures import wikipedia_rows, write_segments

AGGS = [{"type": "count", "name": "edits"}, {"type": "longSum", "name": "added", "fieldName": "added"}]
NODES = 3


@pytest.fixture(scope="module")
def segments(tmp_path_factory: pytest.TempPathFactory) -> list[SegmentInput]:
    return write_segments(wikipedia_rows(), tmp_path_factory.mktemp("push_down_wiki"))


def groupby(**fields: Any) -> GroupByQuery:
    body = {
        "queryType": "groupBy",
        "dataSource": "wiki",
        "intervals": ["2015-09-12/2015-09-13"],
        "granularity": "all",
        "dimensions": ["channel", "namespace"],
        "aggregations": AGGS,
        **fields,
    }
    query = parse_query(body)
    assert isinstance(query, GroupByQuery)
    return query


def through_nodes(query: GroupByQuery, inputs: Sequence[SegmentInput]) -> tuple[list[Any], list[int]]:
    """The answer from `NODES` merged partials (segments dealt round-robin), and each one's rows."""
    partials = [run_merged(query, inputs[i::NODES]) for i in range(NODES)]
    return query.finalize(query.merge(partials)), [p.num_rows for p in partials]


def events(rows: list[Any]) -> list[tuple[Any, ...]]:
    return [(r["timestamp"], *r["event"].values()) for r in rows]


LIMIT_BY_DIMENSIONS = [
    (
        {"columns": [{"dimension": "channel", "direction": "descending"}], "limit": 7, "offset": 3},
        "all",
        "ORDER BY channel DESC, namespace LIMIT 7 OFFSET 3",
    ),
    (
        {"columns": ["namespace"], "limit": 12},
        "all",
        "ORDER BY namespace NULLS FIRST, channel LIMIT 12",
    ),
    (
        {"columns": [{"dimension": "channel", "dimensionOrder": "strlen"}], "limit": 9},
        "all",
        "ORDER BY length(channel), channel, namespace LIMIT 9",
    ),
    ({"limit": 10}, "hour", "ORDER BY h, channel, namespace LIMIT 10"),
    (
        {"columns": [{"dimension": "namespace", "direction": "descending"}], "limit": 15},
        "hour",
        "ORDER BY h, namespace DESC NULLS LAST, channel LIMIT 15",
    ),
]


@pytest.mark.parametrize("limit,granularity,order", LIMIT_BY_DIMENSIONS)
def test_limit_by_dimensions_is_pushed_down_and_exact(
    segments: list[SegmentInput], limit: dict[str, Any], granularity: str, order: str
) -> None:
    query = groupby(granularity=granularity, limitSpec={"type": "default", **limit})
    keep = limit["limit"] + limit.get("offset", 0)
    assert query.node_limit == keep
    got, rows = through_nodes(query, segments)
    assert max(rows) <= keep
    hour = "time_bucket(INTERVAL 1 HOUR, __time)" if granularity == "hour" else "TIMESTAMP '2015-09-12'"
    want = oracle(
        f"SELECT strftime({hour}, '%Y-%m-%dT%H:%M:%S.000Z') h, channel, namespace, count(*), sum(added) "
        f"FROM raw GROUP BY 1, 2, 3 {order}"
    )
    assert events(got) == want


def test_limit_by_aggregator_stays_on_the_broker(segments: list[SegmentInput]) -> None:
    limit = {"type": "default", "columns": [{"dimension": "added", "direction": "descending"}], "limit": 5}
    query = groupby(limitSpec=limit)
    assert query.node_limit is None
    got, rows = through_nodes(query, segments)
    assert max(rows) > 5
    want = oracle(
        "SELECT '2015-09-12T00:00:00.000Z', channel, namespace, count(*), sum(added) a FROM raw "
        "GROUP BY ALL ORDER BY a DESC, channel, namespace LIMIT 5"
    )
    assert events(got) == want


def test_no_push_down_with_having_subtotals_or_when_turned_off() -> None:
    limit = {"type": "default", "columns": ["channel"], "limit": 5}
    assert (
        groupby(
            limitSpec=limit, having={"type": "greaterThan", "aggregation": "edits", "value": 1}
        ).node_limit
        is None
    )
    assert groupby(limitSpec=limit, subtotalsSpec=[["channel"], []]).node_limit is None
    assert groupby(limitSpec=limit, context={"applyLimitPushDown": False}).node_limit is None
    assert groupby(limitSpec={"type": "default", "columns": ["channel"]}).node_limit is None
    assert groupby(limitSpec=limit, context={"applyLimitPushDown": "true"}).node_limit == 5


def _partial(query: GroupByQuery, groups: dict[str, int]) -> pa.Table:
    """A node's merged partial: one group per (channel, namespace "main") with `added` and count 1."""
    n = len(groups)
    columns = {"__segment": pa.nulls(n, pa.string()), "__bucket": [0] * n, "d0": list(groups), "d1": ["main"] * n,
               "a0": [1] * n, "a1": list(groups.values())}  # fmt: skip
    return pa.table(columns, schema=query.plan.schema())


def test_forced_push_down_ranks_each_node_by_aggregator() -> None:
    """Druid's approximation: `y` has the largest total (9 + 9) but each node's best alone is `x`
    or `z` (10), so with the limit pushed down `y` is cut on both nodes."""
    limit = {"type": "default", "columns": [{"dimension": "added", "direction": "descending"}], "limit": 1}
    nodes = [{"x": 10, "y": 9}, {"z": 10, "y": 9}]
    exact = groupby(limitSpec=limit)
    forced = groupby(limitSpec=limit, context={"forceLimitPushDown": True})
    assert forced.node_limit == 1
    for query, best in ((exact, ("y", 18)), (forced, ("x", 10))):
        partials = [query.node_cut(_partial(query, groups)) for groups in nodes]
        (row,) = query.finalize(query.merge(partials))
        assert (row["event"]["channel"], row["event"]["added"]) == best


@pytest.mark.parametrize(
    "fields,message",
    [
        ({"limitSpec": {"type": "default", "columns": ["channel"]}}, "must have a limit"),
        (
            {
                "limitSpec": {"type": "default", "columns": ["channel"], "limit": 3},
                "having": {"type": "greaterThan", "aggregation": "edits", "value": 1},
            },
            "Cannot force limit push down when a having spec is present.",
        ),
        (
            {
                "limitSpec": {"type": "default", "columns": ["twice"], "limit": 3},
                "postAggregations": [
                    {"type": "arithmetic", "name": "twice", "fn": "*",
                     "fields": [{"type": "fieldAccess", "fieldName": "added"}, {"type": "constant", "value": 2}]}
                ],
            },
            "Limit push down when sorting by a post aggregator is not supported.",
        ),
    ],
)  # fmt: skip
def test_forced_push_down_it_cannot_apply_is_refused(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        groupby(**fields, context={"forceLimitPushDown": True})
