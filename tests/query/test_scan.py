"""Scan queries over hourly wikipedia segments, checked against DuckDB SQL over the raw rows."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest

from harness.raw_segments import clip, wikipedia_rows, write_segments
from strata.engine import run_partials, run_to_json
from strata.engine.segment_input import SegmentInput
from strata.query import parse_query
from strata.query.errors import InvalidInput, QueryUnsupported
from timeline import Interval

DAY = "2015-09-12/2015-09-13"
WIKI_COLUMNS = wikipedia_rows().column_names


@pytest.fixture(scope="module")
def segments(tmp_path_factory: pytest.TempPathFactory) -> list[SegmentInput]:
    return write_segments(wikipedia_rows(), tmp_path_factory.mktemp("scan_segments"))


def oracle(sql: str) -> list[dict[str, Any]]:
    """Rows of `sql` over the raw sample (table `raw`, `__time` as epoch ms)."""
    conn = duckdb.connect()
    conn.register("raw_arrow", wikipedia_rows())
    conn.execute("CREATE VIEW raw AS SELECT * REPLACE (epoch_ms(__time) AS __time) FROM raw_arrow")
    result = conn.execute(sql)
    names = [d[0] for d in result.description]
    return [dict(zip(names, r, strict=True)) for r in result.fetchall()]


def scan(inputs: list[SegmentInput], **fields: Any) -> list[dict[str, Any]]:
    q = {"queryType": "scan", "dataSource": "wiki", "intervals": [DAY], **fields}
    return run_to_json(parse_query(q), inputs)


def events(result: list[dict[str, Any]]) -> list[Any]:
    return [e for batch in result for e in batch["events"]]


def freeze(rows: list[dict[str, Any]]) -> Counter[tuple[Any, ...]]:
    return Counter(tuple(sorted(r.items())) for r in rows)


def test_filtered_scan_returns_every_matching_row_grouped_by_segment(segments: list[SegmentInput]) -> None:
    result = scan(
        segments,
        columns=["__time", "page", "added", "cityName"],
        filter={"type": "selector", "dimension": "channel", "value": "#de.wikipedia"},
    )
    expected = oracle("SELECT __time, page, added, cityName FROM raw WHERE channel = '#de.wikipedia'")
    assert freeze(events(result)) == freeze(expected)
    by_id = {s.segment_id: s.interval for s in segments}
    order = [s.segment_id for s in segments]
    assert [order.index(b["segmentId"]) for b in result] == sorted(
        order.index(b["segmentId"]) for b in result
    )
    for batch in result:
        assert batch["columns"] == ["__time", "page", "added", "cityName"]
        assert all(by_id[batch["segmentId"]].contains_instant(e["__time"]) for e in batch["events"])
        assert batch["rowSignature"] == [
            {"name": "__time", "type": "LONG"},
            {"name": "page", "type": "STRING"},
            {"name": "added", "type": "LONG"},
            {"name": "cityName", "type": "STRING"},
        ]


def test_all_columns_lists_time_then_dimensions(segments: list[SegmentInput]) -> None:
    result = scan(segments, limit=3)
    assert len(events(result)) == 3
    first = result[0]
    dims = [c for c in WIKI_COLUMNS if c != "__time"]
    assert first["columns"] == ["__time", *dims]
    expected = oracle(
        "SELECT * FROM raw ORDER BY __time, " + ", ".join(f'"{d}" NULLS LAST' for d in dims) + " LIMIT 3"
    )
    assert events(result) == expected


@pytest.mark.parametrize("order", ["ascending", "descending"])
@pytest.mark.parametrize(("offset", "limit"), [(0, 7), (11, 25), (39_200, 100)])
def test_time_ordered_with_offset_and_limit(
    segments: list[SegmentInput], order: str, offset: int, limit: int
) -> None:
    result = scan(segments, columns=["__time", "user", "delta"], order=order, offset=offset, limit=limit)
    direction = "DESC" if order == "descending" else "ASC"
    all_rows = oracle(f"SELECT __time, user, delta FROM raw ORDER BY __time {direction}")
    got = events(result)
    window = all_rows[offset : offset + limit]
    assert [e["__time"] for e in got] == [r["__time"] for r in window]
    # Rows tied on __time may come in any order; only whole tie groups inside the window are fixed.
    inner = [r for r in window if r["__time"] not in (window[0]["__time"], window[-1]["__time"])]
    assert not (freeze(inner) - freeze(got))
    assert all(b["segmentId"] is None for b in result)


def test_unordered_offset_limit_follow_segment_storage_order(segments: list[SegmentInput]) -> None:
    dims = [c for c in WIKI_COLUMNS if c != "__time"]
    order_by = ", ".join(["__time", *[f'"{d}" NULLS LAST' for d in dims]])
    expected = oracle(f"SELECT __time, page FROM raw ORDER BY {order_by} LIMIT 40 OFFSET 1990")
    got = events(scan(segments, columns=["__time", "page"], offset=1990, limit=40))
    assert got == expected


def test_merging_partials_from_separate_calls_matches_one_call(segments: list[SegmentInput]) -> None:
    for fields in (
        {"columns": ["__time", "page"], "order": "descending", "limit": 50, "offset": 5},
        {"columns": ["__time", "channel", "added"], "limit": 30, "offset": 1000},
        {"limit": 20, "filter": {"type": "selector", "dimension": "cityName", "value": None}},
    ):
        q = parse_query({"queryType": "scan", "dataSource": "wiki", "intervals": [DAY], **fields})
        partials = [run_partials(q, segments[i : i + 5]) for i in range(0, len(segments), 5)]
        assert q.finalize(q.merge(partials)) == run_to_json(q, segments)
        # Associative: merging merged partials changes nothing.
        halves = [q.merge(partials[: len(partials) // 2]), q.merge(partials[len(partials) // 2 :])]
        assert q.finalize(q.merge(halves)) == run_to_json(q, segments)


def test_compacted_list_and_batch_size(segments: list[SegmentInput]) -> None:
    columns = ["__time", "countryName", "deleted"]
    flt = {"type": "in", "dimension": "countryName", "values": ["France", "Japan"]}
    listed = scan(segments, columns=columns, filter=flt)
    compact = scan(segments, columns=columns, filter=flt, resultFormat="compactedList", batchSize=4)
    assert all(len(b["events"]) <= 4 for b in compact)
    assert [[e[c] for c in columns] for e in events(listed)] == events(compact)
    expected = oracle("SELECT __time, countryName, deleted FROM raw WHERE countryName IN ('France', 'Japan')")
    assert freeze(events(listed)) == freeze(expected)


def test_query_interval_clips_segments(segments: list[SegmentInput]) -> None:
    window = Interval.parse("2015-09-12T05:30:00Z/2015-09-12T07:15:00Z")
    q = {"queryType": "scan", "dataSource": "wiki", "intervals": [str(window)], "columns": ["__time", "page"]}
    got = run_to_json(parse_query(q), clip(segments, window))
    expected = oracle(
        f"SELECT __time, page FROM raw WHERE __time >= {window.start} AND __time < {window.end}"
    )
    assert freeze(events(got)) == freeze(expected)


def test_missing_columns_are_null_and_empty_results_are_empty(segments: list[SegmentInput]) -> None:
    got = events(scan(segments[:1], columns=["page", "noSuchColumn"], limit=2))
    assert [set(e) for e in got] == [{"page", "noSuchColumn"}] * 2
    assert all(e["noSuchColumn"] is None for e in got)
    assert scan(segments, filter={"type": "selector", "dimension": "page", "value": "no such page"}) == []
    assert scan([], columns=["page"]) == []


def test_legacy_mode_returns_iso_timestamp(segments: list[SegmentInput]) -> None:
    got = scan(segments, columns=["page"], limit=1, legacy=True)
    expected = oracle(
        "SELECT strftime(make_timestamp(__time * 1000), '%Y-%m-%dT%H:%M:%S.%gZ') AS t FROM raw ORDER BY __time LIMIT 1"
    )
    assert got[0]["columns"] == ["timestamp", "page"]
    assert got[0]["events"][0]["timestamp"] == expected[0]["t"]


def test_mixed_schemas_list_each_segments_own_columns(tmp_path: Path) -> None:
    a = pa.table(
        {"__time": pa.array([1442016000000], pa.int64()), "x": ["1"], "n": pa.array([5], pa.int64())}
    )
    b = pa.table({"__time": pa.array([1442019600000], pa.int64()), "y": ["2"]})
    inputs = write_segments(a, tmp_path / "a") + write_segments(b, tmp_path / "b")
    result = scan(inputs)
    assert [r["columns"] for r in result] == [["__time", "x", "n"], ["__time", "y"]]
    assert events(result) == [
        {"__time": 1442016000000, "x": "1", "n": 5},
        {"__time": 1442019600000, "y": "2"},
    ]


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"limit": 0}, InvalidInput),
        ({"offset": -1}, InvalidInput),
        ({"order": "sideways"}, InvalidInput),
        ({"order": "ascending", "columns": ["page"]}, InvalidInput),
        ({"resultFormat": "table"}, InvalidInput),
        ({"columns": "page"}, InvalidInput),
        ({"batchSize": 0}, InvalidInput),
        ({"resultFormat": "valueVector"}, QueryUnsupported),
        ({"virtualColumns": [{"type": "fancy", "name": "v"}]}, QueryUnsupported),
        ({"filter": {"type": "bogus"}}, InvalidInput),
    ],
)
def test_invalid_scan_queries(fields: dict[str, Any], error: type[Exception]) -> None:
    with pytest.raises(error):
        parse_query({"queryType": "scan", "dataSource": "wiki", "intervals": [DAY], **fields})


def test_to_json_round_trips() -> None:
    q = parse_query(
        {
            "queryType": "scan",
            "dataSource": "wiki",
            "intervals": DAY,
            "columns": ["page"],
            "limit": 3,
            "filter": {"type": "selector", "dimension": "page", "value": "x"},
            "metrics": [],
            "granularity": "all",
        }
    )
    assert parse_query(q.to_json()).to_json() == q.to_json()
    assert not q.segment_cacheable
