"""topN over hourly wikipedia segments against DuckDB SQL on the raw rows."""

from __future__ import annotations

from typing import Any

import pytest

from strata.engine.segment_input import SegmentInput
from strata.query import parse_query
from strata.query.errors import InvalidInput
from strata.query.string_comparators import sort_key
from tests.query.aggregation_helpers import oracle, run, run_split
from tests.query.segment_fixtures import wikipedia_rows, write_segments

EXACT = {"minTopNThreshold": 100_000}  # every segment keeps every value: results are exact


@pytest.fixture(scope="module")
def segments(tmp_path_factory: pytest.TempPathFactory) -> list[SegmentInput]:
    return write_segments(wikipedia_rows(), tmp_path_factory.mktemp("topn_wiki"))


def topn(**fields: Any) -> dict[str, Any]:
    base = {
        "queryType": "topN",
        "dataSource": "wiki",
        "intervals": ["2015-09-12/2015-09-13"],
        "granularity": "all",
        "dimension": "page",
        "metric": "edits",
        "threshold": 5,
        "aggregations": [
            {"type": "count", "name": "edits"},
            {"type": "longSum", "name": "added", "fieldName": "added"},
        ],
        "context": EXACT,
    }
    return {**base, **fields}


def test_top_pages_by_count_match_sql(segments: list[SegmentInput]) -> None:
    got = run(topn(), segments)
    want = oracle("SELECT page, count(*) c, sum(added) FROM raw GROUP BY page ORDER BY c DESC, page LIMIT 5")
    assert got == [
        {
            "timestamp": "2015-09-12T00:46:58.771Z",
            "result": [{"page": p, "edits": c, "added": a} for p, c, a in want],
        }
    ]
    top = got[0]["result"][0]
    assert (top["page"], top["edits"]) == ("Wikipedia:Vandalismusmeldung", 33)  # Druid's published answer
    assert run_split(topn(), segments) == got


def test_metric_may_be_a_post_aggregator_and_dimension_renamed(segments: list[SegmentInput]) -> None:
    q = topn(
        dimension={"type": "default", "dimension": "channel", "outputName": "ch"},
        metric="avg",
        threshold=3,
        postAggregations=[
            {
                "type": "arithmetic",
                "name": "avg",
                "fn": "quotient",
                "fields": [
                    {"type": "fieldAccess", "fieldName": "added"},
                    {"type": "fieldAccess", "fieldName": "edits"},
                ],
            }
        ],
    )
    got = run(q, segments)[0]["result"]
    want = oracle("SELECT channel, sum(added) / count(*) a FROM raw GROUP BY channel ORDER BY a DESC LIMIT 3")
    assert [(r["ch"], r["avg"]) for r in got] == [(c, pytest.approx(a)) for c, a in want]


def test_inverted_and_dimension_orderings(segments: list[SegmentInput]) -> None:
    inv = run(topn(dimension="channel", metric={"type": "inverted", "metric": "edits"}), segments)[0][
        "result"
    ]
    want = oracle("SELECT channel, count(*) c FROM raw GROUP BY channel ORDER BY c ASC, channel LIMIT 5")
    assert [(r["channel"], r["edits"]) for r in inv] == want
    lex = run(
        topn(
            dimension="channel",
            metric={"type": "dimension", "ordering": "lexicographic", "previousStop": "#en.wikipedia"},
        ),
        segments,
    )[0]["result"]
    channels = sorted(c for (c,) in oracle("SELECT DISTINCT channel FROM raw") if c > "#en.wikipedia")
    assert [r["channel"] for r in lex] == channels[:5]
    num = run(topn(dimension="metroCode", metric={"type": "dimension", "ordering": "numeric"}), segments)[0][
        "result"
    ]
    codes = sorted({c for (c,) in oracle("SELECT DISTINCT metroCode FROM raw")}, key=sort_key("numeric"))
    assert [r["metroCode"] for r in num] == codes[:5]


def test_hourly_buckets(segments: list[SegmentInput]) -> None:
    got = run(topn(granularity="hour", dimension="channel", threshold=2), segments)
    want = oracle(
        "SELECT strftime(time_bucket(INTERVAL 1 HOUR, __time), '%Y-%m-%dT%H:00:00.000Z') h, channel, "
        "count(*) c FROM raw GROUP BY h, channel QUALIFY row_number() OVER (PARTITION BY h ORDER BY c DESC, channel) <= 2 "
        "ORDER BY h, c DESC, channel"
    )
    flat = [(r["timestamp"], e["channel"], e["edits"]) for r in got for e in r["result"]]
    assert flat == want


def test_segments_keep_only_min_topn_threshold_values(segments: list[SegmentInput]) -> None:
    """Approximation as Druid's: each segment contributes only its own top values."""
    q = topn(threshold=3, context={"minTopNThreshold": 3})
    got = run_split(q, segments)[0]["result"]
    want = oracle(
        "WITH per AS (SELECT time_bucket(INTERVAL 1 HOUR, __time) h, page, count(*) c, sum(added) a FROM raw GROUP BY h, page "
        "QUALIFY row_number() OVER (PARTITION BY h ORDER BY c DESC, page) <= 3) "
        "SELECT page, sum(c)::BIGINT s, sum(a)::BIGINT FROM per GROUP BY page ORDER BY s DESC, page LIMIT 3"
    )
    assert [(r["page"], r["edits"], r["added"]) for r in got] == want


def test_no_rows_gives_an_empty_bucket_stamped_with_the_first_cursor(segments: list[SegmentInput]) -> None:
    # Druid answers a bucket its cursors walked with an empty list; `all` carries the earliest
    # cursor start, here the sample's first event (the segments start at midnight)
    flt = {"type": "selector", "dimension": "channel", "value": "#nowhere"}
    assert run(topn(filter=flt), segments) == [{"timestamp": "2015-09-12T00:46:58.771Z", "result": []}]


def test_bad_metric_and_threshold() -> None:
    with pytest.raises(InvalidInput):
        parse_query(topn(metric="nope"))
    with pytest.raises(InvalidInput):
        parse_query(topn(threshold=0))


def test_cache_key_covers_threshold_not_context() -> None:
    base = parse_query(topn())
    assert base.cache_key() == parse_query(topn(context={**EXACT, "queryId": "x", "timeout": 5})).cache_key()
    assert base.cache_key() != parse_query(topn(threshold=6)).cache_key()
    assert base.cache_key() != parse_query(topn(metric="added")).cache_key()


def test_previous_stop_past_every_value_keeps_the_bucket_empty(segments: list[SegmentInput]) -> None:
    """Druid answers every bucket its cursors walk, also when `previousStop` leaves no value in it."""
    stop = {"type": "dimension", "ordering": "lexicographic", "previousStop": "~"}  # after every channel
    hours = oracle("SELECT DISTINCT strftime(time_bucket(INTERVAL 1 HOUR, __time), '%Y-%m-%dT%H:00:00.000Z') "
                   "FROM raw ORDER BY 1")  # fmt: skip
    for query in (topn(dimension="channel", metric=stop, granularity="hour"),
                  topn(dimension="channel", metric=stop, granularity="hour", context={})):  # fmt: skip
        for answer in (run(query, segments), run_split(query, segments)):
            assert answer == [{"timestamp": h, "result": []} for (h,) in hours]
    everything = run(topn(dimension="channel", metric=stop), segments)
    assert everything == [{"timestamp": "2015-09-12T00:46:58.771Z", "result": []}]
    # a stop inside the values empties only the buckets with nothing after it
    late = {"type": "dimension", "ordering": "lexicographic", "previousStop": "#vi.wikipedia"}
    got = run_split(topn(dimension="channel", metric=late, granularity="hour", threshold=1), segments)
    want = dict(oracle("SELECT strftime(time_bucket(INTERVAL 1 HOUR, __time), '%Y-%m-%dT%H:00:00.000Z') h, "
                       "min(channel) FILTER (WHERE channel > '#vi.wikipedia') FROM raw GROUP BY h"))  # fmt: skip
    assert {r["timestamp"]: [e["channel"] for e in r["result"]] for r in got} == {
        h: [] if c is None else [c] for h, c in want.items()
    }


def test_lexicographic_order_of_a_long_dimension_compares_strings(segments: list[SegmentInput]) -> None:
    """A LONG output ordered `lexicographic` sorts as its strings ("15063" before "1555"), also for
    `previousStop` and when inverted."""
    dim = {"type": "default", "dimension": "added", "outputName": "added_value", "outputType": "LONG"}
    values = [v for (v,) in oracle("SELECT DISTINCT added FROM raw WHERE added IS NOT NULL")]
    as_text = sorted(values, key=lambda v: str(v).encode())
    for metric, want in (
        ({"type": "dimension", "ordering": "lexicographic"}, as_text),
        ({"type": "dimension", "ordering": "lexicographic", "previousStop": "1555"},
         [v for v in as_text if str(v) > "1555"]),
        ({"type": "inverted", "metric": {"type": "dimension", "ordering": "lexicographic", "previousStop": "1555"}},
         [v for v in reversed(as_text) if str(v) < "1555"]),
        ({"type": "dimension", "ordering": "numeric", "previousStop": "1555"}, [v for v in sorted(values) if v > 1555]),
    ):  # fmt: skip
        query = topn(dimension=dim, metric=metric, threshold=7)
        for answer in (run(query, segments), run_split(query, segments)):
            assert [e["added_value"] for e in answer[0]["result"]] == want[:7], metric
