"""Search queries over hourly wikipedia segments, against DuckDB counts and Python sorting."""

from __future__ import annotations

import functools
from typing import Any

import duckdb
import pytest

from harness.raw_segments import wikipedia_rows, write_segments
from strata.engine import run_partials, run_to_json
from strata.engine.segment_input import SegmentInput
from strata.query import parse_query
from strata.query.errors import InvalidInput, QueryUnsupported
from strata.query.string_comparators import compare_alphanumeric
from timeline import format_instant

DAY = "2015-09-12/2015-09-13"


@pytest.fixture(scope="module")
def segments(tmp_path_factory: pytest.TempPathFactory) -> list[SegmentInput]:
    return write_segments(wikipedia_rows(), tmp_path_factory.mktemp("search_segments"))


def counts(dims: list[str], where: str, bucket: str = "0") -> list[tuple[int, str, str, int]]:
    conn = duckdb.connect()
    conn.register("raw", wikipedia_rows())
    parts = []
    for d in dims:
        col = 'CAST("' + d + '" AS VARCHAR)'
        parts.append(
            f"SELECT {bucket} AS b, '{d}' AS dimension, {col} AS value, count(*) AS c FROM raw "
            f"WHERE {where.format(col=col)} GROUP BY ALL"
        )
    return conn.execute(" UNION ALL ".join(parts)).fetchall()


def search(inputs: list[SegmentInput], **fields: Any) -> list[Any]:
    q = {"queryType": "search", "dataSource": "wiki", "intervals": [DAY], **fields}
    return run_to_json(parse_query(q), inputs)


def test_insensitive_contains_over_two_dimensions_sorted_lexicographically(
    segments: list[SegmentInput],
) -> None:
    got = search(
        segments,
        searchDimensions=["page", "user"],
        query={"type": "insensitive_contains", "value": "kE"},
        limit=10_000,
    )
    expected = counts(["page", "user"], "lower({col}) LIKE '%ke%'")
    expected.sort(key=lambda r: (r[2], r[1]))
    assert len(got) == 1
    assert got[0]["timestamp"] == "2015-09-12T00:00:00.000Z"  # first segment read starts the day
    assert got[0]["result"] == [{"dimension": d, "value": v, "count": c} for _, d, v, c in expected]


def test_limit_sort_and_case_sensitive_contains(segments: list[SegmentInput]) -> None:
    got = search(
        segments,
        searchDimensions=["page"],
        query={"type": "contains", "value": "Talk", "caseSensitive": True},
        sort={"type": "strlen"},
        limit=25,
    )
    expected = counts(["page"], "{col} LIKE '%Talk%'")
    expected.sort(key=lambda r: (len(r[2]), r[2]))
    assert got[0]["result"] == [{"dimension": d, "value": v, "count": c} for _, d, v, c in expected[:25]]


def test_alphanumeric_sort_fragment_and_filter(segments: list[SegmentInput]) -> None:
    got = search(
        segments,
        searchDimensions=["comment"],
        query={"type": "fragment", "values": ["1", "a"]},
        sort={"type": "alphanumeric"},
        filter={"type": "selector", "dimension": "channel", "value": "#en.wikipedia"},
        limit=50,
    )
    expected = counts(
        ["comment"], "channel = '#en.wikipedia' AND {col} LIKE '%1%' AND lower({col}) LIKE '%a%'"
    )
    expected.sort(key=lambda r: functools.cmp_to_key(compare_alphanumeric)(r[2]))
    assert got[0]["result"] == [{"dimension": d, "value": v, "count": c} for _, d, v, c in expected[:50]]


def test_hourly_granularity_and_partial_merge(segments: list[SegmentInput]) -> None:
    fields = {
        "searchDimensions": ["countryName"],
        "query": {"type": "contains", "value": "an"},
        "granularity": "hour",
    }
    got = search(segments, **fields)
    hour = "epoch_ms(__time) // 3600000 * 3600000"
    expected = counts(["countryName"], "lower({col}) LIKE '%an%'", bucket=hour)
    by_hour: dict[int, list[Any]] = {}
    for b, d, v, c in expected:
        by_hour.setdefault(b, []).append({"dimension": d, "value": v, "count": c})
    assert got == [
        {"timestamp": format_instant(b), "result": sorted(h, key=lambda x: x["value"])}
        for b, h in sorted(by_hour.items())
    ]
    q = parse_query({"queryType": "search", "dataSource": "wiki", "intervals": [DAY], **fields})
    partials = [run_partials(q, segments[i : i + 3]) for i in range(0, len(segments), 3)]
    assert q.finalize(q.merge([q.merge(partials[:4]), q.merge(partials[4:])])) == got


def test_default_dimensions_include_every_string_dimension(segments: list[SegmentInput]) -> None:
    got = search(segments[:2], query={"type": "insensitive_contains", "value": "Ü"}, limit=50_000)
    dims = [c for c in wikipedia_rows().column_names if c != "__time"]
    first_two = f"__time < TIMESTAMPTZ '{format_instant(segments[1].interval.end)}'"
    expected = counts(dims, first_two + " AND lower({col}) LIKE '%ü%'")
    assert expected
    assert sorted((h["dimension"], h["value"], h["count"]) for h in got[0]["result"]) == sorted(
        (d, v, c) for _, d, v, c in expected
    )


def test_no_hits_and_errors(segments: list[SegmentInput]) -> None:
    assert (
        search(segments, searchDimensions=["page"], query={"type": "contains", "value": "\u2603\u2603"}) == []
    )
    base = {"queryType": "search", "dataSource": "wiki", "intervals": [DAY]}
    for bad in (
        {},
        {"query": {"type": "nope"}},
        {"query": {"type": "contains", "value": "a"}, "sort": "sideways"},
        {"query": {"type": "contains", "value": "a"}, "limit": -1},
    ):
        with pytest.raises(InvalidInput):
            parse_query({**base, **bad})
    with pytest.raises(QueryUnsupported):
        parse_query(
            {
                **base,
                "query": {"type": "contains", "value": "a"},
                "searchDimensions": [{"type": "extraction", "dimension": "page"}],
            }
        )
    q = parse_query({**base, "query": {"type": "contains", "value": "a"}, "limit": 3})
    assert q.cache_key() == parse_query({**base, "query": {"type": "contains", "value": "a"}}).cache_key()
    assert parse_query(q.to_json()).to_json() == q.to_json()
