"""Virtual columns and expression filters against DuckDB SQL written by hand over the raw rows."""

from __future__ import annotations

from typing import Any

import pytest

from strata.engine.segment_input import SegmentInput
from strata.query import parse_query
from strata.query.errors import InvalidInput, QueryError
from tests.query.aggregation_helpers import oracle, run, run_split
from tests.query.segment_fixtures import wikipedia_rows, write_segments
from timeline import format_instant

DAY = "2015-09-12/2015-09-13"


@pytest.fixture(scope="module")
def segments(tmp_path_factory: pytest.TempPathFactory) -> list[SegmentInput]:
    return write_segments(wikipedia_rows(), tmp_path_factory.mktemp("vc_wiki"), rows_per_segment=5_000)


def vc(name: str, expression: str, output_type: str | None = None) -> dict[str, Any]:
    out = {"type": "expression", "name": name, "expression": expression}
    if output_type:
        out["outputType"] = output_type
    return out


def base(kind: str, **fields: Any) -> dict[str, Any]:
    return {"queryType": kind, "dataSource": "wiki", "intervals": [DAY], "granularity": "all", **fields}


@pytest.mark.parametrize(
    ("expression", "where"),
    [
        ("added > 100 && delta < 0", "added > 100 AND delta < 0"),
        ("cityName == 'Paris'", "cityName = 'Paris'"),
        ("!(cityName == 'Paris')", "NOT (cityName = 'Paris')"),
        ("isNew", "lower(isNew) = 'true'"),
        ("like(page, 'Talk:%') || strlen(page) > 60", "page LIKE 'Talk:%' OR length(page) > 60"),
        ("timestamp_extract(__time, 'HOUR') >= 20", "hour(__time) >= 20"),
        ("nvl(regionIsoCode, 'none') == 'none'", "coalesce(regionIsoCode, 'none') = 'none'"),
        ("added / 7 == 2", "trunc(added / 7) = 2"),
        ("-delta % 5 == 3", "(-delta) % 5 = 3"),
    ],
)
def test_expression_filter_counts(segments: list[SegmentInput], expression: str, where: str) -> None:
    q = base(
        "timeseries",
        filter={"type": "expression", "expression": expression},
        aggregations=[{"type": "count", "name": "n"}],
    )
    (want,) = oracle(f"SELECT count(*) FROM raw WHERE {where}")
    assert run(q, segments)[0]["result"]["n"] == want[0]
    negated = {**q, "filter": {"type": "not", "field": q["filter"]}}
    (unknown_or_false,) = oracle(f"SELECT count(*) FROM raw WHERE NOT ({where})")
    assert run(negated, segments)[0]["result"]["n"] == unknown_or_false[0]


def test_group_by_virtual_dimension_and_summed_expression(segments: list[SegmentInput]) -> None:
    q = base(
        "groupBy",
        virtualColumns=[vc("v0", "upper(substring(page, 0, 1))"), vc("v1", "added - deleted", "LONG")],
        dimensions=[{"type": "default", "dimension": "v0", "outputName": "first"}],
        aggregations=[{"type": "count", "name": "n"}, {"type": "longSum", "name": "net", "fieldName": "v1"}],
    )
    want = oracle(
        "SELECT upper(substring(page, 1, 1)) AS f, count(*), sum(added - deleted) FROM raw GROUP BY f ORDER BY f"
    )
    for answer in (run(q, segments), run_split(q, segments)):
        got = [(r["event"]["first"], r["event"]["n"], r["event"]["net"]) for r in answer]
        assert got == want


def test_topn_on_zoned_hour(segments: list[SegmentInput]) -> None:
    q = base(
        "topN",
        virtualColumns=[vc("h", "timestamp_extract(__time, 'HOUR', 'America/Los_Angeles')", "LONG")],
        dimension={"type": "default", "dimension": "h", "outputName": "hour", "outputType": "LONG"},
        metric="edits",
        threshold=4,
        aggregations=[{"type": "count", "name": "edits"}],
    )
    want = oracle(
        "SELECT hour(timezone('America/Los_Angeles', __time)) AS h, count(*) AS c FROM raw "
        "GROUP BY h ORDER BY c DESC, h LIMIT 4"
    )
    got = [(r["hour"], r["edits"]) for r in run(q, segments)[0]["result"]]
    assert got == want


def test_timeseries_with_monthly_floor_in_zone_and_conditional_sum(segments: list[SegmentInput]) -> None:
    q = base(
        "groupBy",
        virtualColumns=[
            vc("bucket", "timestamp_floor(__time, 'PT6H', null, 'Asia/Kolkata')"),
            vc("weighted", "case_searched(added > 50, added * 1.5, delta)"),
        ],
        dimensions=[{"type": "default", "dimension": "bucket", "outputType": "LONG"}],
        aggregations=[{"type": "doubleSum", "name": "w", "fieldName": "weighted"}],
    )
    want = oracle(
        "SELECT epoch_ms(timezone('Asia/Kolkata', time_bucket(INTERVAL 6 HOUR, timezone('Asia/Kolkata', __time)))) "
        "AS b, sum(CASE WHEN added > 50 THEN added * 1.5 ELSE delta END) FROM raw GROUP BY b ORDER BY b"
    )
    got = [(r["event"]["bucket"], r["event"]["w"]) for r in run(q, segments)]
    assert [g[0] for g in got] == [w[0] for w in want]
    assert [g[1] for g in got] == pytest.approx([w[1] for w in want])


def test_virtual_column_reading_another_and_shadowing_a_column(segments: list[SegmentInput]) -> None:
    q = base(
        "groupBy",
        virtualColumns=[
            vc("channel", "concat(lower(namespace), '/', v2)"),
            vc("v2", "if(added > 10, 'big', 'small')"),
        ],
        dimensions=["channel"],
        aggregations=[{"type": "count", "name": "n"}],
        limitSpec={"type": "default", "columns": [{"dimension": "n", "direction": "descending"}], "limit": 3},
    )
    want = oracle(
        "SELECT lower(namespace) || '/' || CASE WHEN added > 10 THEN 'big' ELSE 'small' END AS c, count(*) AS n "
        "FROM raw GROUP BY c ORDER BY n DESC LIMIT 3"
    )
    assert [(r["event"]["channel"], r["event"]["n"]) for r in run(q, segments)] == want


def test_scan_returns_virtual_columns(segments: list[SegmentInput]) -> None:
    q = base(
        "scan",
        virtualColumns=[
            vc("len", "strlen(page)"),
            vc("stamp", "timestamp_format(__time, 'yyyy-MM-dd HH:mm')"),
        ],
        columns=["__time", "page", "len", "stamp"],
        filter={"type": "expression", "expression": "len > 80"},
        order="ascending",
        resultFormat="compactedList",
    )
    want = oracle(
        "SELECT epoch_ms(__time), page, length(page), strftime(__time, '%Y-%m-%d %H:%M') FROM raw "
        "WHERE length(page) > 80 ORDER BY __time"
    )
    rows = [tuple(e) for batch in run(q, segments) for e in batch["events"]]
    assert sorted(rows, key=lambda r: (r[0], r[1])) == sorted(want, key=lambda r: (r[0], r[1]))


def test_doubles_and_longs_past_their_range_answer_as_in_java(
    segments: list[SegmentInput],
) -> None:
    """Druid's doubles follow Java: log(0) is -Infinity, 0.0 / 0 is NaN, printed by Jackson as the
    strings "-Infinity", "NaN"; cast to LONG, Java's (long) narrows them to Long.MIN_VALUE and 0,
    any double past the range to its nearest end (DuckDB's cast would fail); a LONG sum past the
    range wraps around (DuckDB's would fail)."""
    expressions = {
        "ln0": "log(added - added)", "nan": "(added - added) / 0.0", "inf": "-log(added - added)",
        "min": "cast(log(added - added), 'LONG')", "zero": "cast((added - added) / 0.0, 'LONG')",
        "max": "cast(1e300 + added, 'LONG')", "cut": "cast(-2.7, 'LONG')",
        # LONG sums wrap around as Java's: 2^62 + 2^62 is Long.MIN_VALUE
        "wrap": "4611686018427387904 + 4611686018427387904 + (added - added)",
        "under": "-9223372036854775807 - 2 - (added - added)",
    }  # fmt: skip
    q = base(
        "scan",
        virtualColumns=[vc(name, text) for name, text in expressions.items()],
        columns=list(expressions),
        limit=1,
        resultFormat="compactedList",
    )
    (row,) = [e for batch in run(q, segments) for e in batch["events"]]
    assert row == ["-Infinity", "NaN", "Infinity", -(2**63), 0, 2**63 - 1, -2, -(2**63), 2**63 - 1]


def test_filter_keeps_nothing_as_the_empty_array_and_a_filtered_column_as_null(
    segments: list[SegmentInput],
) -> None:
    """Druid's `filter` keeping nothing is the empty array (FilterFunction: its length 0), where an
    mv-filtered virtual column's row left with no value is null (ListFilteredVirtualColumn)."""
    q = base(
        "scan",
        virtualColumns=[
            vc("none", "array_length(filter((x) -> x == 'no such page', array(page)))"),
            {"type": "mv-filtered", "name": "kept", "delegate": "page", "values": ["no such page"]},
        ],
        columns=["none", "kept"],
        limit=1,
        resultFormat="compactedList",
    )
    (row,) = [e for batch in run(q, segments) for e in batch["events"]]
    assert row == [0, None]


def test_first_hour_timestamps_are_druid_instants(segments: list[SegmentInput]) -> None:
    q = base(
        "timeseries",
        virtualColumns=[vc("t", "timestamp_shift(__time, 'P1M', -1)")],
        aggregations=[{"type": "longMin", "name": "t", "fieldName": "t"}],
    )
    (want,) = oracle("SELECT epoch_ms(min(__time) - INTERVAL 1 MONTH) FROM raw")
    assert format_instant(run(q, segments)[0]["result"]["t"]) == format_instant(want[0])


@pytest.mark.parametrize(
    ("virtual", "message"),
    [
        ([vc("v", "added +")], "position"),
        ([vc("v", "frobnicate(added)")], "frobnicate"),
        ([vc("a", "b + 1"), vc("b", "a + 1")], "itself"),
        ([vc("v", "1"), vc("v", "2")], "Duplicate"),
        ([vc("__time", "1")], "reserved"),
        ([vc("v", "timestamp_floor(__time, 'P1X')")], "period"),
        ([vc("v", "timestamp_format(__time, 'yyyy', 'Mars/Olympus')")], "time zone"),
        ([{"type": "expression", "name": "v", "expression": "1", "outputType": "COMPLEX"}], "outputType"),
    ],
)
def test_bad_virtual_columns_are_400(segments: list[SegmentInput], virtual: list[Any], message: str) -> None:
    q = base(
        "timeseries",
        virtualColumns=virtual,
        aggregations=[{"type": "longSum", "name": "s", "fieldName": "v"}],
    )
    with pytest.raises(InvalidInput) as e:
        run(q, segments)
    assert message in e.value.error_message and e.value.status == 400


def test_unsupported_virtual_column_type_is_501() -> None:
    with pytest.raises(QueryError) as e:
        parse_query(base("timeseries", virtualColumns=[{"type": "fancy", "name": "v"}]))
    assert e.value.status == 501


def test_arithmetic_post_aggregator_null_operand_wins_over_zero_divisor(segments: list[SegmentInput]) -> None:
    """Found by the differential run: null / 0 is null in Druid (the null check comes first)."""
    q = base(
        "timeseries",
        filter={"type": "selector", "dimension": "channel", "value": "#nowhere"},
        aggregations=[{"type": "count", "name": "c"}, {"type": "longMax", "name": "m", "fieldName": "delta"}],
        postAggregations=[
            {
                "type": "arithmetic",
                "name": "p",
                "fn": "/",
                "fields": [
                    {"type": "fieldAccess", "fieldName": "m"},
                    {"type": "fieldAccess", "fieldName": "c"},
                ],
            },
            {
                "type": "arithmetic",
                "name": "z",
                "fn": "/",
                "fields": [
                    {"type": "fieldAccess", "fieldName": "c"},
                    {"type": "fieldAccess", "fieldName": "c"},
                ],
            },
        ],
    )
    assert run(q, segments)[0]["result"] == {"c": 0, "m": None, "p": None, "z": 0.0}


def test_extraction_dimension_specs(segments: list[SegmentInput]) -> None:
    """Druid's `extraction` dimension spec: values mapped by the function, grouped as strings."""
    q = base(
        "groupBy",
        dimensions=[
            {
                "type": "extraction",
                "dimension": "page",
                "outputName": "first",
                "extractionFn": {"type": "substring", "index": 0, "length": 1},
            },
            {
                "type": "extraction",
                "dimension": "__time",
                "outputName": "hour",
                "extractionFn": {"type": "timeFormat", "format": "HH", "timeZone": "UTC"},
            },
        ],
        aggregations=[{"type": "count", "name": "n"}],
        filter={"type": "selector", "dimension": "channel", "value": "#de.wikipedia"},
    )
    want = oracle(
        "SELECT substring(page, 1, 1), strftime(__time, '%H'), count(*) FROM raw "
        "WHERE channel = '#de.wikipedia' GROUP BY 1, 2 ORDER BY 1, 2"
    )
    got = sorted((r["event"]["first"], r["event"]["hour"], r["event"]["n"]) for r in run(q, segments))
    assert got == sorted(want)
    top = base(
        "topN",
        dimension={
            "type": "extraction",
            "dimension": "channel",
            "outputName": "lang",
            "extractionFn": {"type": "regex", "expr": "^#([a-z]+)\\.", "index": 1},
        },
        metric="n",
        threshold=3,
        aggregations=[{"type": "count", "name": "n"}],
    )
    want_top = oracle(
        "SELECT regexp_extract(channel, '^#([a-z]+)\\.', 1) AS l, count(*) AS n FROM raw GROUP BY l "
        "ORDER BY n DESC LIMIT 3"
    )
    assert [(r["lang"], r["n"]) for r in run(top, segments)[0]["result"]] == want_top


def test_subtotals_spec_equals_grouping_sets(segments: list[SegmentInput]) -> None:
    """Each subtotal is the groupBy over that subset of the dimensions, one after the other."""
    q = base(
        "groupBy",
        dimensions=["channel", "isRobot"],
        aggregations=[
            {"type": "count", "name": "n"},
            {"type": "longSum", "name": "added", "fieldName": "added"},
        ],
        filter={"type": "in", "dimension": "channel", "values": ["#de.wikipedia", "#fr.wikipedia"]},
        subtotalsSpec=[["channel", "isRobot"], ["isRobot"], []],
    )
    where = "WHERE channel IN ('#de.wikipedia', '#fr.wikipedia')"
    got = run(q, segments)
    sizes = [
        len(oracle(f"SELECT 1 FROM raw {where} GROUP BY {g}")) for g in ("channel, isRobot", "isRobot", "()")
    ]
    parts = [got[: sizes[0]], got[sizes[0] : sizes[0] + sizes[1]], got[sizes[0] + sizes[1] :]]
    assert sorted(
        (r["event"]["channel"], r["event"]["isRobot"], r["event"]["n"]) for r in parts[0]
    ) == sorted(oracle(f"SELECT channel, isRobot, count(*) FROM raw {where} GROUP BY 1, 2"))
    assert sorted((r["event"]["isRobot"], r["event"]["added"]) for r in parts[1]) == sorted(
        oracle(f"SELECT isRobot, sum(added) FROM raw {where} GROUP BY 1")
    )
    assert [r["event"] for r in parts[2]] == [
        dict(zip(["n", "added"], oracle(f"SELECT count(*), sum(added) FROM raw {where}")[0], strict=True))
    ]
    with pytest.raises(InvalidInput):
        parse_query({**q, "subtotalsSpec": [["page"]]})


def test_aggregators_with_an_expression_input(segments: list[SegmentInput]) -> None:
    q = base(
        "timeseries",
        aggregations=[
            {"type": "longSum", "name": "net", "expression": "added - deleted"},
            {"type": "doubleMax", "name": "ratio", "expression": "added / (deleted + 1.0)"},
            {
                "type": "filtered",
                "name": "fr",
                "filter": {"type": "selector", "dimension": "channel", "value": "#fr.wikipedia"},
                "aggregator": {"type": "longSum", "name": "fr", "expression": "strlen(page)"},
            },
        ],
    )
    (want,) = oracle(
        "SELECT sum(added - deleted), max(added / (deleted + 1.0)), "
        "sum(length(page)) FILTER (WHERE channel = '#fr.wikipedia') FROM raw"
    )
    for answer in (run(q, segments), run_split(q, segments)):
        got = answer[0]["result"]
        assert (got["net"], got["fr"]) == (want[0], want[2]) and got["ratio"] == pytest.approx(want[1])
    for bad in (
        {"type": "longSum", "name": "x", "expression": "added +"},
        {"type": "longSum", "name": "x", "expression": "added", "fieldName": "added"},
    ):
        with pytest.raises(InvalidInput):
            parse_query(base("timeseries", aggregations=[bad]))
