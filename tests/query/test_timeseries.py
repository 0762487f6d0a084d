"""timeseries over wikipedia segments and synthetic gaps, against DuckDB SQL on the raw rows."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import datasketches
import pyarrow as pa
import pytest

from strata.engine.segment_input import SegmentInput
from strata.query import parse_query
from strata.query.bucket_limit import MAX_BUCKETS
from strata.query.errors import InvalidInput, QueryError
from strata.query.timeseries import TimeseriesQuery
from tests.query.aggregation_helpers import oracle, run, run_split
from tests.query.segment_fixtures import clip, hll_column, wikipedia_rows, write_segments
from timeline import Interval, format_instant

DAY = "2015-09-12/2015-09-13"
HOUR_MS = 3_600_000


@pytest.fixture(scope="module")
def segments(tmp_path_factory: pytest.TempPathFactory) -> list[SegmentInput]:
    return write_segments(wikipedia_rows(), tmp_path_factory.mktemp("ts_wiki"))


def ts(**fields: Any) -> dict[str, Any]:
    return {"queryType": "timeseries", "dataSource": "wiki", "intervals": [DAY], **fields}


AGGS = [
    {"type": "count", "name": "rows"},
    {"type": "longSum", "name": "added", "fieldName": "added"},
    {"type": "doubleSum", "name": "deleted", "fieldName": "deleted"},
    {"type": "longMin", "name": "minDelta", "fieldName": "delta"},
    {"type": "longMax", "name": "maxDelta", "fieldName": "delta"},
    {"type": "doubleMax", "name": "maxAddedD", "fieldName": "added"},
]


def test_hourly_sums_match_sql(segments: list[SegmentInput]) -> None:
    got = run(ts(granularity="hour", aggregations=AGGS), segments)
    want = oracle(
        "SELECT epoch_ms(time_bucket(INTERVAL 1 HOUR, __time)) AS b, count(*), sum(added), "
        "sum(deleted)::DOUBLE, min(delta), max(delta), max(added)::DOUBLE FROM raw GROUP BY b ORDER BY b"
    )
    assert [r["timestamp"] for r in got] == [format_instant(w[0]) for w in want]
    for row, w in zip(got, want, strict=True):
        assert row["result"] == dict(
            zip(["rows", "added", "deleted", "minDelta", "maxDelta", "maxAddedD"], w[1:], strict=True)
        )
        assert isinstance(row["result"]["deleted"], float) and isinstance(row["result"]["added"], int)


def test_merging_partials_from_separate_calls_is_associative(segments: list[SegmentInput]) -> None:
    q = ts(
        granularity="six_hour",
        aggregations=[
            *AGGS,
            {"type": "longFirst", "name": "f", "fieldName": "added"},
            {"type": "stringLast", "name": "l", "fieldName": "page"},
        ],
    )
    assert run_split(q, segments) == run(q, segments)


def test_all_granularity_stamped_with_first_data_time(segments: list[SegmentInput]) -> None:
    got = run(ts(granularity="all", aggregations=AGGS[:2]), segments)
    want = oracle("SELECT min(epoch_ms(__time)), count(*), sum(added) FROM raw")[0]
    assert got == [{"timestamp": format_instant(want[0]), "result": {"rows": want[1], "added": want[2]}}]
    assert got[0]["timestamp"] == "2015-09-12T00:46:58.771Z"


def test_all_granularity_with_no_segments_gives_one_empty_row() -> None:
    got = run(ts(intervals=["2020-01-01/2020-01-02"], granularity="all", aggregations=AGGS[:2]), [])
    assert got == [{"timestamp": "2020-01-01T00:00:00.000Z", "result": {"rows": 0, "added": None}}]
    skip = ts(
        intervals=["2020-01-01/2020-01-02"],
        granularity="all",
        aggregations=AGGS[:2],
        context={"skipEmptyBuckets": True},
    )
    assert run(skip, []) == []


def test_first_and_last(segments: list[SegmentInput]) -> None:
    aggs = [
        {"type": "longFirst", "name": "f", "fieldName": "added"},
        {"type": "longLast", "name": "l", "fieldName": "added"},
        {"type": "stringFirst", "name": "fp", "fieldName": "page"},
        {"type": "doubleLast", "name": "ld", "fieldName": "delta"},
    ]
    got = run(ts(granularity="all", aggregations=aggs), segments)[0]["result"]
    first = oracle("SELECT added, page FROM raw ORDER BY __time ASC LIMIT 1")[0]
    last = oracle("SELECT added, delta FROM raw ORDER BY __time DESC LIMIT 1")[0]
    assert got == {"f": first[0], "l": last[0], "fp": first[1], "ld": float(last[1])}


def test_filtered_aggregator_and_query_filter(segments: list[SegmentInput]) -> None:
    aggs = [
        {
            "type": "filtered",
            "filter": {"type": "selector", "dimension": "isRobot", "value": "true"},
            "aggregator": {"type": "longSum", "name": "robotAdded", "fieldName": "added"},
        },
        {"type": "count", "name": "rows"},
    ]
    flt = {"type": "selector", "dimension": "channel", "value": "#en.wikipedia"}
    got = run(ts(granularity="day", filter=flt, aggregations=aggs), segments)
    want = oracle(
        "SELECT sum(added) FILTER (WHERE isRobot = 'true'), count(*) FROM raw WHERE channel = '#en.wikipedia'"
    )[0]
    assert got == [
        {"timestamp": "2015-09-12T00:00:00.000Z", "result": {"robotAdded": want[0], "rows": want[1]}}
    ]


def test_period_granularity_in_los_angeles(segments: list[SegmentInput]) -> None:
    gran = {"type": "period", "period": "P1D", "timeZone": "America/Los_Angeles"}
    got = run(ts(granularity=gran, aggregations=AGGS[:2]), segments)
    want = oracle(
        "SELECT strftime(date_trunc('day', timezone('America/Los_Angeles', __time)), '%Y-%m-%dT%H:%M:%S.000-07:00')"
        " AS d, count(*), sum(added) FROM raw GROUP BY d ORDER BY d"
    )
    assert got == [{"timestamp": d, "result": {"rows": c, "added": s}} for d, c, s in want]
    assert got[0]["timestamp"] == "2015-09-11T00:00:00.000-07:00"


def test_hour_period_in_zone_prints_local_offset(segments: list[SegmentInput]) -> None:
    gran = {"type": "period", "period": "PT1H", "timeZone": "America/Los_Angeles"}
    got = run(ts(granularity=gran, aggregations=AGGS[:1]), segments)
    assert got[0]["timestamp"] == "2015-09-11T17:00:00.000-07:00"
    assert sum(r["result"]["rows"] for r in got) == 39244


def test_post_aggregators_and_grand_total(segments: list[SegmentInput]) -> None:
    posts = [
        {
            "type": "arithmetic",
            "name": "avg",
            "fn": "/",
            "fields": [
                {"type": "fieldAccess", "fieldName": "added"},
                {"type": "fieldAccess", "fieldName": "rows"},
            ],
        },
        {
            "type": "arithmetic",
            "name": "zero",
            "fn": "/",
            "fields": [
                {"type": "fieldAccess", "fieldName": "added"},
                {"type": "constant", "name": "z", "value": 0},
            ],
        },
        {
            "type": "doubleGreatest",
            "name": "g",
            "fields": [
                {"type": "fieldAccess", "fieldName": "added"},
                {"type": "fieldAccess", "fieldName": "deleted"},
            ],
        },
    ]
    q = ts(
        granularity="hour",
        aggregations=AGGS[:3],
        postAggregations=posts,
        limit=3,
        descending=True,
        context={"grandTotal": True},
    )
    got = run(q, segments)
    want = oracle(
        "SELECT epoch_ms(time_bucket(INTERVAL 1 HOUR, __time)) AS b, count(*), sum(added), sum(deleted) "
        "FROM raw GROUP BY b ORDER BY b DESC LIMIT 3"
    )
    assert [r["timestamp"] for r in got[:3]] == [format_instant(w[0]) for w in want]
    for row, (_, c, a, d) in zip(got, want, strict=False):
        assert row["result"]["avg"] == pytest.approx(a / c)
        assert row["result"]["zero"] == 0.0
        assert row["result"]["g"] == float(max(a, d))
    total = got[3]
    assert total["timestamp"] is None
    c, a = sum(w[1] for w in want), sum(w[2] for w in want)
    assert total["result"]["rows"] == c and total["result"]["added"] == a
    assert total["result"]["avg"] == pytest.approx(a / c)


@pytest.fixture(scope="module")
def gappy(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[SegmentInput], list[SegmentInput]]:
    """Rows at 01:10, 01:20, 04:30 and 07:05 on 2020-01-01, as day segments and as hour segments."""
    base = 1577836800000
    times = [
        base + HOUR_MS + 600_000,
        base + HOUR_MS + 1_200_000,
        base + 4 * HOUR_MS + 1_800_000,
        base + 7 * HOUR_MS + 300_000,
    ]
    table = pa.table(
        {
            "__time": pa.array(times, pa.int64()).cast(pa.timestamp("ms", tz="UTC")),
            "dim": ["a", "b", "a", "c"],
            "value": pa.array([1, 2, 3, 4], pa.int64()),
        }
    )
    day = write_segments(table, tmp_path_factory.mktemp("gap_day"), "day", data_source="gap")
    hour = write_segments(table, tmp_path_factory.mktemp("gap_hour"), "hour", data_source="gap")
    return day, hour


def test_zero_fill_inside_a_segment_only(gappy: tuple[list[SegmentInput], list[SegmentInput]]) -> None:
    day, hour = gappy
    q = ts(
        dataSource="gap",
        intervals=["2020-01-01/2020-01-02"],
        granularity="hour",
        aggregations=[{"type": "count", "name": "n"}, {"type": "longSum", "name": "s", "fieldName": "value"}],
    )
    got = run(q, day)
    # a day segment's cursor spans its first..last row: hours 01..07, empty ones filled
    assert [r["timestamp"][11:13] for r in got] == ["01", "02", "03", "04", "05", "06", "07"]
    assert got[1]["result"] == {"n": 0, "s": None} and got[0]["result"] == {"n": 2, "s": 3}
    # hour segments exist only where rows are: nothing to fill between them
    assert [r["timestamp"][11:13] for r in run(q, hour)] == ["01", "04", "07"]
    skip = dict(q, context={"skipEmptyBuckets": True})
    assert [r["timestamp"][11:13] for r in run(skip, day)] == ["01", "04", "07"]


def test_zero_fill_clipped_to_query_interval(gappy: tuple[list[SegmentInput], list[SegmentInput]]) -> None:
    day, _ = gappy
    window = Interval.parse("2020-01-01T03:00:00Z/2020-01-01T06:00:00Z")
    q = ts(
        dataSource="gap",
        intervals=[str(window)],
        granularity="hour",
        aggregations=[{"type": "count", "name": "n"}],
    )
    got = run(q, clip(day, window))
    assert [(r["timestamp"][11:13], r["result"]["n"]) for r in got] == [("03", 0), ("04", 1), ("05", 0)]
    got_all = run(dict(q, granularity="all"), clip(day, window))
    assert got_all == [{"timestamp": "2020-01-01T03:00:00.000Z", "result": {"n": 1}}]


def test_hll_sketch_build_within_error(segments: list[SegmentInput]) -> None:
    aggs = [
        {"type": "HLLSketchBuild", "name": "users", "fieldName": "user", "lgK": 12},
        {"type": "HLLSketchBuild", "name": "pages", "fieldName": "page", "round": True},
        {"type": "cardinality", "name": "card", "fields": ["user"]},
        {
            "type": "cardinality",
            "name": "pairs",
            "fields": ["channel", "isRobot"],
            "byRow": True,
            "round": True,
        },
    ]
    got = run_split(ts(granularity="all", aggregations=aggs), segments)[0]["result"]
    users, pages, pairs = oracle(
        "SELECT count(DISTINCT user), count(DISTINCT page), count(DISTINCT (channel, isRobot)) FROM raw"
    )[0]
    assert got["users"] == pytest.approx(users, rel=0.05) and isinstance(got["users"], float)
    assert got["card"] == pytest.approx(users, rel=0.05)
    assert got["pages"] == pytest.approx(pages, rel=0.05) and isinstance(got["pages"], int)
    assert got["pairs"] == pytest.approx(pairs, rel=0.05)


def test_hll_sketch_merge_over_ingested_sketches(tmp_path: Path) -> None:
    rows = wikipedia_rows().select(["__time", "channel", "user"])
    rows = rows.append_column("user_sketch", hll_column(rows.column("user")))
    metric = {"type": "HLLSketchBuild", "name": "user_sketch", "fieldName": "user", "lgK": 12}
    inputs = write_segments(
        rows.drop_columns(["user"]), tmp_path, "hour", dimensions=["channel"], metrics=[metric]
    )
    q = ts(
        granularity="all",
        aggregations=[{"type": "HLLSketchMerge", "name": "u", "fieldName": "user_sketch"}],
        postAggregations=[
            {
                "type": "HLLSketchEstimate",
                "name": "e",
                "round": True,
                "field": {"type": "fieldAccess", "fieldName": "u"},
            }
        ],
    )
    got = run_split(q, inputs)[0]["result"]
    exact = oracle("SELECT count(DISTINCT user) FROM raw")[0][0]
    assert got["u"] == pytest.approx(exact, rel=0.05)
    assert got["e"] == round(got["u"])
    raw = run(dict(q, context={"finalize": False}), inputs)[0]["result"]["u"]
    sketch = datasketches.hll_sketch.deserialize(base64.b64decode(raw))
    assert sketch.get_estimate() == pytest.approx(got["u"])


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"aggregations": [{"type": "noSuchAgg", "name": "x"}]}, "Unknown aggregator type"),
        ({"aggregations": [{"type": "longSum", "name": "x"}]}, "fieldName"),
        ({"granularity": "fortnight"}, "granularity"),
        ({"aggregations": [{"type": "count", "name": "x"}, {"type": "count", "name": "x"}]}, "Duplicate"),
        ({"postAggregations": [{"type": "fieldAccess", "name": "p", "fieldName": "nope"}]}, "Missing fields"),
        (
            {"postAggregations": [{"type": "arithmetic", "name": "p", "fn": "%", "fields": []}]},
            "arithmetic fn",
        ),
        ({"limit": 0}, "limit"),
    ],
)
def test_invalid_queries_are_400(change: dict[str, Any], message: str) -> None:
    q = {**ts(granularity="hour", aggregations=[{"type": "count", "name": "rows"}]), **change}
    with pytest.raises(InvalidInput) as e:
        parse_query(q)
    assert e.value.status == 400 and message in e.value.error_message


def test_unsupported_features_are_501() -> None:
    for change in (
        {"virtualColumns": [{"type": "fancy", "name": "v"}]},
        {"aggregations": [{"type": "expression", "name": "x", "fold": "__acc + x", "initialValue": 0}]},
    ):
        with pytest.raises(QueryError) as e:
            parse_query(ts(granularity="hour", **change))
        assert e.value.status == 501


def test_granularity_none_zero_fills_every_millisecond(
    gappy: tuple[list[SegmentInput], list[SegmentInput]],
) -> None:
    """Druid's cursor walks each millisecond of its window at granularity `none`: the answer has one
    row per millisecond of [max(start, first row), min(end, last row + 1)), rows or not."""
    day, hour = gappy
    base = 1577836800000 + HOUR_MS + 600_000  # the 01:10 row; the next is 10 minutes later
    window = Interval(base - 5, base + 20)
    q = ts(dataSource="gap", intervals=[str(window)], granularity="none",
           aggregations=[{"type": "count", "name": "n"}, {"type": "longSum", "name": "s", "fieldName": "value"}])  # fmt: skip
    for inputs in (day, hour):
        got = run(q, clip(inputs, window))
        # the cursor starts at the segment's first row (01:10), not at the interval's start
        assert [r["timestamp"] for r in got] == [format_instant(ms) for ms in range(base, base + 20)]
        assert got[0]["result"] == {"n": 1, "s": 1}
        assert all(r["result"] == {"n": 0, "s": None} for r in got[1:])
    skip = dict(q, context={"skipEmptyBuckets": True})
    assert [r["timestamp"] for r in run(skip, clip(day, window))] == [format_instant(base)]


def test_too_many_buckets_is_a_400_naming_the_ways_out(
    gappy: tuple[list[SegmentInput], list[SegmentInput]],
) -> None:
    day, _ = gappy
    q = ts(dataSource="gap", intervals=["2020-01-01/2020-01-02"], granularity="none",
           aggregations=[{"type": "count", "name": "n"}])  # fmt: skip
    with pytest.raises(QueryError) as e:  # 01:10 to 07:05 is 21 million milliseconds
        run(q, day)
    assert e.value.status == 400 and e.value.error == "Resource limit exceeded"
    assert "skipEmptyBuckets" in e.value.error_message and "coarser granularity" in e.value.error_message
    # the broker's merge checks the sum of what every node sent
    many = pa.table({"__segment": pa.nulls(MAX_BUCKETS + 1, pa.string()),
                     "__bucket": pa.array(range(MAX_BUCKETS + 1), pa.int64()),
                     "a0": pa.array([1] * (MAX_BUCKETS + 1), pa.int64())})  # fmt: skip
    parsed = parse_query(q)
    assert isinstance(parsed, TimeseriesQuery)
    with pytest.raises(QueryError) as e:
        parsed.finalize(many.cast(parsed.plan.schema()))
    assert e.value.status == 400 and "skipEmptyBuckets" in e.value.error_message
    skip = dict(q, context={"skipEmptyBuckets": True})
    assert [r["result"]["n"] for r in run(skip, day)] == [1, 1, 1, 1]


def test_grand_total_over_no_bucket_is_all_null(segments: list[SegmentInput]) -> None:
    """Druid's grand total combines the rows it is given; over none, every aggregator is null."""
    aggs = [{"type": "count", "name": "rows"}, {"type": "longSum", "name": "added", "fieldName": "added"}]
    posts = [{"type": "arithmetic", "name": "twice", "fn": "*",
              "fields": [{"type": "fieldAccess", "fieldName": "rows"}, {"type": "constant", "value": 2}]}]  # fmt: skip
    nothing = {"type": "selector", "dimension": "channel", "value": "#nowhere"}
    q = ts(granularity="hour", aggregations=aggs, postAggregations=posts, filter=nothing,
           context={"grandTotal": True, "skipEmptyBuckets": True})  # fmt: skip
    assert run(q, segments) == [{"timestamp": None, "result": {"rows": None, "added": None, "twice": None}}]
    empty_interval = dict(q, intervals=["2001-01-01/2001-01-02"], context={"grandTotal": True})
    assert run(empty_interval, []) == [
        {"timestamp": None, "result": {"rows": None, "added": None, "twice": None}}
    ]
    # with buckets, the total combines them (zero-filled ones count 0)
    some = dict(q, filter=None, context={"grandTotal": True})
    (want,) = oracle("SELECT count(*), sum(added) FROM raw")
    assert run(some, segments)[-1]["result"] == {"rows": want[0], "added": want[1], "twice": 2.0 * want[0]}
