"""segmentMetadata over hourly wikipedia segments, against per-hour statistics from DuckDB SQL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest

from harness.raw_segments import HOUR_MS, wikipedia_rows, write_segments
from strata.engine import run_partials, run_to_json
from strata.engine.segment_input import SegmentInput
from strata.query import parse_query
from strata.query.errors import InvalidInput

METRICS = [{"type": "longSum", "name": "added", "fieldName": "added"}]
STRING_COLUMNS = [
    c for c in wikipedia_rows().column_names if wikipedia_rows().schema.field(c).type == pa.string()
]


@pytest.fixture(scope="module")
def segments(tmp_path_factory: pytest.TempPathFactory) -> list[SegmentInput]:
    return write_segments(wikipedia_rows(), tmp_path_factory.mktemp("sm_segments"), metrics=METRICS)


def hourly_stats(column: str) -> dict[int, tuple[bool, int, str | None, str | None]]:
    """Per hour bucket start: (has nulls, distinct non-null count, min, max)."""
    conn = duckdb.connect()
    conn.register("raw", wikipedia_rows())
    sql = (
        f'SELECT epoch_ms(__time) // {HOUR_MS} * {HOUR_MS} AS h, bool_or("{column}" IS NULL), '
        f'count(DISTINCT "{column}"), min("{column}"), max("{column}") FROM raw GROUP BY h'
    )
    return {r[0]: (r[1], r[2], r[3], r[4]) for r in conn.execute(sql).fetchall()}


def sm(inputs: list[SegmentInput], **fields: Any) -> list[Any]:
    return run_to_json(parse_query({"queryType": "segmentMetadata", "dataSource": "wiki", **fields}), inputs)


def test_per_segment_analysis(segments: list[SegmentInput]) -> None:
    result = sm(
        segments, analysisTypes=["cardinality", "interval", "minmax", "aggregators", "rollup", "size"]
    )
    assert [r["id"] for r in result] == [s.segment_id for s in segments]
    stats = {c: hourly_stats(c) for c in ("cityName", "channel", "page")}
    conn = duckdb.connect()
    conn.register("raw", wikipedia_rows())
    counts = dict(
        conn.execute(
            f"SELECT epoch_ms(__time) // {HOUR_MS} * {HOUR_MS}, count(*) FROM raw GROUP BY 1"
        ).fetchall()
    )
    for seg, analysis in zip(segments, result, strict=True):
        start = seg.interval.start
        assert analysis["numRows"] == counts[start]
        assert analysis["intervals"] == [str(seg.interval)]
        assert analysis["aggregators"] == {
            "added": {"type": "longSum", "name": "added", "fieldName": "added"}
        }
        assert analysis["rollup"] is False
        assert analysis["size"] == sum(c["size"] for c in analysis["columns"].values()) > 0
        cols = analysis["columns"]
        assert cols["__time"]["type"] == "LONG" and cols["__time"]["hasNulls"] is False
        assert cols["added"]["type"] == "LONG" and cols["added"]["cardinality"] is None
        for name, per_hour in stats.items():
            has_nulls, distinct, low, high = per_hour[start]
            assert cols[name]["type"] == "STRING"
            assert cols[name]["hasNulls"] == has_nulls
            assert cols[name]["cardinality"] == distinct + (1 if has_nulls else 0)
            assert cols[name]["minValue"] == (None if has_nulls else low)
            assert cols[name]["maxValue"] == high


def test_merged_analysis(segments: list[SegmentInput]) -> None:
    q = parse_query(
        {
            "queryType": "segmentMetadata",
            "dataSource": "wiki",
            "merge": True,
            "toInclude": {"type": "list", "columns": ["channel", "added", "nope"]},
        }
    )
    result = run_to_json(q, segments)
    assert len(result) == 1
    merged = result[0]
    assert merged["id"] == "merged"
    assert merged["numRows"] == wikipedia_rows().num_rows
    assert merged["intervals"] == ["2015-09-12T00:00:00.000Z/2015-09-13T00:00:00.000Z"]
    assert sorted(merged["columns"]) == ["added", "channel"]
    per_hour = hourly_stats("channel")
    assert merged["columns"]["channel"]["cardinality"] == max(d for _, d, _, _ in per_hour.values())
    assert merged["columns"]["channel"]["maxValue"] == max(h for *_, h in per_hour.values() if h is not None)
    partials = [run_partials(q, segments[i : i + 6]) for i in range(0, len(segments), 6)]
    assert q.finalize(q.merge([q.merge(partials[:2]), q.merge(partials[2:])])) == result


def test_merge_reports_type_conflicts(tmp_path: Path) -> None:
    a = pa.table({"__time": pa.array([0], pa.int64()), "x": ["1"]})
    b = pa.table({"__time": pa.array([HOUR_MS], pa.int64()), "x": pa.array([2], pa.int64())})
    inputs = write_segments(a, tmp_path / "a") + write_segments(b, tmp_path / "b")
    merged = sm(inputs, merge=True)[0]
    assert merged["columns"]["x"]["errorMessage"] == "error:cannot_merge_diff_types: [STRING] and [LONG]"


def test_to_include_none_and_errors(segments: list[SegmentInput]) -> None:
    result = sm(segments[:2], toInclude={"type": "none"}, analysisTypes=[])
    assert [r["columns"] for r in result] == [{}, {}]
    assert result[0]["intervals"] is None and result[0]["aggregators"] is None
    for bad in ({"analysisTypes": ["telepathy"]}, {"toInclude": {"type": "some"}}, {"merge": "maybe"}):
        with pytest.raises(InvalidInput):
            parse_query({"queryType": "segmentMetadata", "dataSource": "wiki", **bad})


def test_without_cardinality_or_minmax_null_flags_come_from_the_files_statistics(
    segments: list[SegmentInput], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A SQL catalog's refresh (`analysisTypes: []`) must not count distinct strings over every row:
    the flags are read from the footers, and equal the raw rows' (DuckDB over them)."""
    import strata.engine.segment_metadata as engine_sm
    from strata.engine.segment_input import scan_relation

    scans: list[list[str]] = []

    def counted(inputs: Any, columns: list[str]) -> Any:
        scans.append(columns)
        return scan_relation(inputs, columns)

    monkeypatch.setattr(engine_sm, "scan_relation", counted)
    light = sm(segments, analysisTypes=[])
    assert scans == []
    full = sm(segments, analysisTypes=["cardinality", "minmax"])
    assert scans  # the full analysis scans the rows
    stats = {c: hourly_stats(c) for c in STRING_COLUMNS}
    for seg, a, b in zip(segments, light, full, strict=True):
        assert {c: v["hasNulls"] for c, v in a["columns"].items()} == {
            c: v["hasNulls"] for c, v in b["columns"].items()
        }
        for name, per_hour in stats.items():
            assert a["columns"][name]["hasNulls"] == per_hour[seg.interval.start][0], name
            assert a["columns"][name]["cardinality"] is None and a["columns"][name]["minValue"] is None
