"""groupBy over hourly wikipedia segments against DuckDB SQL on the raw rows."""

from __future__ import annotations

from typing import Any

import pytest

from strata.engine.segment_input import SegmentInput
from strata.query import parse_query
from strata.query.errors import InvalidInput
from tests.query.aggregation_helpers import oracle, run, run_split
from tests.query.segment_fixtures import wikipedia_rows, write_segments

AGGS = [{"type": "count", "name": "edits"}, {"type": "longSum", "name": "added", "fieldName": "added"}]


@pytest.fixture(scope="module")
def segments(tmp_path_factory: pytest.TempPathFactory) -> list[SegmentInput]:
    return write_segments(wikipedia_rows(), tmp_path_factory.mktemp("gb_wiki"))


def groupby(**fields: Any) -> dict[str, Any]:
    base = {
        "queryType": "groupBy",
        "dataSource": "wiki",
        "intervals": ["2015-09-12/2015-09-13"],
        "granularity": "all",
        "dimensions": ["channel", "isRobot"],
        "aggregations": AGGS,
    }
    return {**base, **fields}


def events(rows: list[Any]) -> list[tuple[Any, ...]]:
    return [tuple(r["event"].values()) for r in rows]


def test_default_order_is_by_dimensions(segments: list[SegmentInput]) -> None:
    got = run(groupby(), segments)
    want = oracle(
        "SELECT channel, isRobot, count(*), sum(added) FROM raw GROUP BY ALL ORDER BY channel, isRobot"
    )
    assert events(got) == want
    assert {r["timestamp"] for r in got} == {"2015-09-12T00:00:00.000Z"} and got[0]["version"] == "v1"
    assert run_split(groupby(), segments) == got


def test_having_limit_offset_and_ordering(segments: list[SegmentInput]) -> None:
    q = groupby(
        postAggregations=[
            {
                "type": "arithmetic",
                "name": "per",
                "fn": "/",
                "fields": [
                    {"type": "fieldAccess", "fieldName": "added"},
                    {"type": "fieldAccess", "fieldName": "edits"},
                ],
            }
        ],
        having={
            "type": "or",
            "havingSpecs": [
                {"type": "greaterThan", "aggregation": "edits", "value": 500},
                {
                    "type": "and",
                    "havingSpecs": [
                        {"type": "dimSelector", "dimension": "isRobot", "value": "true"},
                        {
                            "type": "not",
                            "havingSpec": {"type": "lessThan", "aggregation": "added", "value": 10000},
                        },
                    ],
                },
            ],
        },
        limitSpec={
            "type": "default",
            "limit": 4,
            "offset": 2,
            "columns": [{"dimension": "per", "direction": "descending"}, "channel"],
        },
    )
    got = run(q, segments)
    want = oracle(
        "SELECT channel, isRobot, count(*) e, sum(added) a, sum(added) / count(*) p FROM raw GROUP BY ALL "
        "HAVING e > 500 OR (isRobot = 'true' AND NOT a < 10000) ORDER BY p DESC, channel, isRobot LIMIT 4 OFFSET 2"
    )
    assert [(c, r, e, a) for c, r, e, a, _ in events(got)] == [w[:4] for w in want]
    assert [g[4] for g in events(got)] == [pytest.approx(w[4]) for w in want]


def test_filter_having_and_equal_to(segments: list[SegmentInput]) -> None:
    q = groupby(
        dimensions=["channel"],
        having={
            "type": "filter",
            "filter": {
                "type": "bound",
                "dimension": "edits",
                "lower": "100",
                "upper": "1000",
                "ordering": "numeric",
            },
        },
    )
    want = oracle(
        "SELECT channel, count(*) e, sum(added) FROM raw GROUP BY ALL HAVING e BETWEEN 100 AND 1000 ORDER BY channel"
    )
    assert events(run(q, segments)) == want
    eq = groupby(
        dimensions=["channel"], having={"type": "equalTo", "aggregation": "edits", "value": want[0][1]}
    )
    assert [e[0] for e in events(run(eq, segments))] == [
        w[0]
        for w in oracle(
            f"SELECT channel FROM raw GROUP BY ALL HAVING count(*) = {want[0][1]} ORDER BY channel"
        )
    ]


def test_hour_granularity_strlen_order_and_arrays(segments: list[SegmentInput]) -> None:
    q = groupby(
        granularity="hour",
        dimensions=["countryIsoCode"],
        filter={"type": "not", "field": {"type": "null", "column": "countryIsoCode"}},
        limitSpec={
            "type": "default",
            "columns": [
                {"dimension": "countryIsoCode", "direction": "descending", "dimensionOrder": "strlen"}
            ],
        },
        context={"resultAsArray": True},
    )
    got = run(q, segments)
    want = oracle(
        "SELECT epoch_ms(time_bucket(INTERVAL 1 HOUR, __time)) h, countryIsoCode c, count(*), sum(added) FROM raw "
        "WHERE countryIsoCode IS NOT NULL GROUP BY h, c ORDER BY h, length(c) DESC, c DESC"
    )
    assert [tuple(r) for r in got] == want


def test_numeric_output_type_and_first_last(segments: list[SegmentInput]) -> None:
    q = groupby(
        dimensions=[
            {"type": "default", "dimension": "metroCode", "outputName": "metro", "outputType": "LONG"}
        ],
        aggregations=[
            {"type": "count", "name": "edits"},
            {"type": "stringLast", "name": "lastPage", "fieldName": "page"},
        ],
        filter={"type": "in", "dimension": "metroCode", "values": ["501", "803", "602"]},
    )
    got = run(q, segments)
    want = oracle(
        "SELECT metroCode::BIGINT m, count(*), arg_max(page, __time) FROM raw "
        "WHERE metroCode IN ('501', '803', '602') GROUP BY m ORDER BY m"
    )
    assert events(got) == want


def test_not_segment_cacheable_and_errors() -> None:
    q = parse_query(groupby())
    assert q.segment_cacheable is False
    assert (
        q.cache_key()
        == parse_query(
            groupby(limitSpec={"type": "default", "limit": 3}, context={"queryId": "other"})
        ).cache_key()
    )
    assert q.cache_key() != parse_query(groupby(dimensions=["channel"])).cache_key()
    for bad in (
        {"dimensions": ["edits"]},
        {"having": {"type": "bogus"}},
        {"limitSpec": {"type": "default", "columns": [{"dimension": "x", "direction": "sideways"}]}},
    ):
        with pytest.raises(InvalidInput):
            parse_query(groupby(**bad))
