"""Timeseries counts and sums over mapped Arrow copies (`column_sums`) equal DuckDB over the raw rows.

The oracle is hand-written DuckDB SQL over the rows the segments were written from. Each case
also checks whether the sums answered (the engine's counter) or the scan did: nulls, a column a
segment lacks, NaN, a column typed long in some segments and double in others, totals that
would overflow a long, segments spanning several buckets, a segment read in part.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from historical_service.arrow_copy import mapped_copy
from strata.engine import SegmentInput, column_sums, mapped_source, run_partials, run_to_json
from strata.engine.column_sums import SUMMED
from strata.query import parse_query
from tests.query.segment_fixtures import clip, write_segments
from tests.segment_engine.test_footer_answers import ETERNITY, HOUR, START, sorted_times
from timeline import Interval, format_instant, parse_instant


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[pa.Table, list[SegmentInput]]]:
    """Four hours with every column, then one hour without `bytes` and with `mixed` as doubles."""
    rng = np.random.default_rng(5)
    n = 600
    main = pa.table(
        {
            "__time": sorted_times(rng, range(4), n),
            "country": pa.array([f"c{i}" for i in rng.integers(0, 4, n)]),
            "bytes": pa.array(rng.integers(-50, 10**6, n), pa.int64(), mask=rng.random(n) < 0.1),
            "score": pa.array(rng.normal(0, 1e3, n), pa.float64(), mask=rng.random(n) < 0.1),
            "nan": pa.array(np.where(rng.random(n) < 0.02, np.nan, rng.random(n))),
            "allnull": pa.nulls(n, pa.int64()),
            "small": pa.array(rng.integers(-3, 3, n), pa.int32()),
            "huge": pa.array(rng.integers(2**61, 2**62, n), pa.int64()),
            "mixed": pa.array(rng.integers(0, 100, n), pa.int64()),
        }
    )
    out = tmp_path_factory.mktemp("sums")
    inputs = write_segments(main, out, "hour", data_source="t", dimensions=["country"])
    m = 80
    other = pa.table(
        {
            "__time": sorted_times(rng, range(5, 6), m),
            "country": pa.array([f"c{i}" for i in rng.integers(0, 4, m)]),
            "score": pa.array(rng.normal(0, 1e3, m)),
            "nan": pa.array(rng.random(m)),
            "allnull": pa.nulls(m, pa.int64()),
            "small": pa.array(rng.integers(-9, 9, m), pa.int32()),
            "huge": pa.array(rng.integers(0, 10, m), pa.int64()),
            "mixed": pa.array(rng.random(m) * 100),
        }
    )
    inputs += write_segments(other, out, "hour", data_source="t", dimensions=["country"])
    raw = pa.concat_tables([pq.read_table(i.path) for i in inputs], promote_options="permissive")
    for inp in inputs:
        assert mapped_source.register(inp.path, mapped_copy(Path(inp.path)))
    try:
        yield raw, inputs
    finally:
        for inp in inputs:
            mapped_source.unregister(inp.path)


@pytest.fixture(autouse=True)
def any_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """These segments hold 80-170 rows: summed whatever their size (one test restores the floor)."""
    monkeypatch.setattr(column_sums, "MIN_ROWS", 0)


SUMMABLE = [
    ({"type": "count", "name": "rows"}, "count(*)"),
    ({"type": "longSum", "name": "bytes", "fieldName": "bytes"}, "sum(bytes)"),
    ({"type": "doubleSum", "name": "score", "fieldName": "score"}, "sum(score)"),
    ({"type": "doubleSum", "name": "nan", "fieldName": "nan"}, "sum(nan)"),
    ({"type": "longSum", "name": "none", "fieldName": "allnull"}, "sum(allnull)"),
    ({"type": "longMin", "name": "lo", "fieldName": "bytes"}, "min(bytes)"),
    ({"type": "longMax", "name": "hi", "fieldName": "bytes"}, "max(bytes)"),
]


def oracle(raw: pa.Table, exprs: list[str], interval: Interval, bucket_ms: int | None) -> list[list[Any]]:
    """[bucket or None, values...] per bucket with rows (one row overall without a bucket)."""
    conn = duckdb.connect()
    conn.register("raw", raw)
    bucket = "NULL" if bucket_ms is None else f"epoch_ms(__time) // {bucket_ms} * {bucket_ms}"
    sql = (
        f"SELECT {bucket} AS b, {', '.join(exprs)} FROM raw WHERE epoch_ms(__time) >= {interval.start} "
        f"AND epoch_ms(__time) < {interval.end} GROUP BY ALL ORDER BY 1"
    )
    rows = conn.execute(sql).fetchall()
    return [
        ["NaN" if isinstance(v, float) and math.isnan(v) else v for v in r] for r in rows
    ]  # as Druid prints it


def answers(body: dict[str, Any], inputs: list[SegmentInput]) -> Iterator[list[dict[str, Any]]]:
    """The data node's own answer, and a broker's (per-segment partials merged, then finalised)."""
    parsed = parse_query(body)
    yield run_to_json(parsed, inputs)
    yield parsed.finalize(parsed.merge([run_partials(parsed, inputs)]))


def rows_of(result: list[dict[str, Any]], names: list[str], hourly: bool) -> list[list[Any]]:
    out = []
    for r in result:
        out.append([parse_instant(r["timestamp"]) if hourly else None, *(r["result"][n] for n in names)])
    return out


def same(got: list[list[Any]], want: list[list[Any]]) -> bool:
    if len(got) != len(want):
        return False
    for g, w in zip(got, want, strict=True):
        for a, b in zip(g, w, strict=True):
            if isinstance(a, float) and isinstance(b, float):
                if not math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-9):
                    return False
            elif a != b:
                return False
    return True


def body(aggs: list[dict[str, Any]], granularity: str, interval: str = ETERNITY) -> dict[str, Any]:
    return {"queryType": "timeseries", "dataSource": "t", "intervals": [interval], "granularity": granularity,
            "aggregations": aggs, "context": {"skipEmptyBuckets": True}}  # fmt: skip


EVERYWHERE = Interval(-(2**62), 2**62)


def summed_segments(
    raw: pa.Table, inputs: list[SegmentInput], granularity: str, bucket_ms: int | None,
    window: Interval = EVERYWHERE,
) -> int:  # fmt: skip
    """Asserts both paths' answers of every summable aggregator over `window` equal the oracle's;
    returns how many segment partials the sums gave (counted over both paths)."""
    aggs = [a for a, _ in SUMMABLE]
    want = oracle(raw, [e for _, e in SUMMABLE], window, bucket_ms)
    if bucket_ms is None:
        want[0][0] = None
    interval = (
        ETERNITY if window == EVERYWHERE else f"{format_instant(window.start)}/{format_instant(window.end)}"
    )
    before = SUMMED.segments
    for result in answers(body(aggs, granularity, interval), inputs):
        assert same(rows_of(result, [a["name"] for a in aggs], bucket_ms is not None), want)
    return SUMMED.segments - before


@pytest.mark.parametrize("granularity,bucket_ms", [("all", None), ("hour", HOUR), ("day", 24 * HOUR)])
def test_whole_segments_are_summed(
    data: tuple[pa.Table, list[SegmentInput]], granularity: str, bucket_ms: int | None
) -> None:
    raw, inputs = data
    assert summed_segments(raw, inputs, granularity, bucket_ms) == 2 * len(
        inputs
    )  # every segment, on both paths


def test_all_granularity_timestamp_is_first_row(data: tuple[pa.Table, list[SegmentInput]]) -> None:
    raw, inputs = data
    conn = duckdb.connect()
    conn.register("raw", raw)
    row = conn.execute("SELECT min(epoch_ms(__time)) FROM raw").fetchone()
    assert row is not None
    result = run_to_json(parse_query(body([SUMMABLE[1][0]], "all")), inputs)
    assert result[0]["timestamp"] == format_instant(row[0])


@pytest.mark.parametrize(
    "agg,expr",
    [
        ({"type": "longSum", "name": "v", "fieldName": "huge"}, "sum(huge)"),  # would overflow a long
        ({"type": "longSum", "name": "v", "fieldName": "mixed"}, "sum(CAST(trunc(mixed) AS BIGINT))"),
        ({"type": "doubleSum", "name": "v", "fieldName": "bytes"}, "sum(CAST(bytes AS DOUBLE))"),
        ({"type": "longSum", "name": "v", "fieldName": "small"}, "sum(small)"),
        ({"type": "floatSum", "name": "v", "fieldName": "score"}, "sum(score)"),
        ({"type": "doubleMax", "name": "v", "fieldName": "score"}, "max(score)"),
    ],
)
def test_what_the_sums_do_not_reproduce_is_scanned(
    data: tuple[pa.Table, list[SegmentInput]], agg: dict[str, Any], expr: str
) -> None:
    """Each of these is left to the scan in every segment whose column holds values (the
    `huge` hour without big values and segments lacking the column may still be summed)."""
    raw, inputs = data
    q = body([agg], "hour")
    if agg["fieldName"] == "huge":
        with pytest.raises(duckdb.ConversionException, match="out of range"):  # the scan's error
            run_to_json(parse_query(q), inputs)
        return
    want = oracle(raw, [expr], EVERYWHERE, HOUR)
    before = SUMMED.segments
    for result in answers(q, inputs):
        got = rows_of(result, ["v"], True)
        if agg["type"] == "floatSum":  # finalised as a float32
            got = [[b, None if v is None else float(np.float32(v))] for b, v in got]
            want = [[b, None if v is None else float(np.float32(v))] for b, v in want]
        assert same(got, want)
    lacking = sum(1 for i in inputs if agg["fieldName"] not in pq.read_schema(i.path).names)
    assert SUMMED.segments - before <= 2 * lacking


def test_partly_read_segments_are_scanned(data: tuple[pa.Table, list[SegmentInput]]) -> None:
    raw, inputs = data
    part = Interval(START + HOUR // 3, START + 5 * HOUR + HOUR // 2)  # cuts the first and last
    clipped = clip(inputs, part)
    assert summed_segments(raw, clipped, "hour", HOUR, part) == 2 * (
        len(clipped) - 2
    )  # the middle ones, on both paths


def test_segments_spanning_several_buckets_are_scanned(data: tuple[pa.Table, list[SegmentInput]]) -> None:
    raw, inputs = data
    assert summed_segments(raw, inputs, "minute", 60_000) == 0


def test_without_arrow_copies_the_files_are_scanned(
    data: tuple[pa.Table, list[SegmentInput]], tmp_path: Path
) -> None:
    raw, inputs = data
    copies = []
    for i, inp in enumerate(inputs):  # the same files under other paths, never registered
        target = tmp_path / str(i) / "index.parquet"
        target.parent.mkdir()
        target.write_bytes(Path(inp.path).read_bytes())
        copies.append(SegmentInput(inp.segment_id, inp.descriptor, str(target), inp.interval))
    assert summed_segments(raw, copies, "hour", HOUR) == 0


def test_small_segments_are_scanned(
    data: tuple[pa.Table, list[SegmentInput]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under the row floor the scan, which takes many segments in one pass, costs less."""
    raw, inputs = data
    monkeypatch.setattr(column_sums, "MIN_ROWS", 32_768)
    assert summed_segments(raw, inputs, "hour", HOUR) == 0


def test_a_column_without_statistics_is_bounded_by_a_pass_over_it(tmp_path: Path) -> None:
    """Without the file's statistics the overflow bound comes from the column itself: small
    values are summed, values whose total could pass a long are left to the scan."""
    rng = np.random.default_rng(9)
    n = 100
    rows = pa.table(
        {
            "__time": sorted_times(rng, range(1), n),
            "country": pa.array(["c"] * n),
            "small": pa.array(rng.integers(-1000, 1000, n), pa.int64()),
            "huge": pa.array(rng.integers(2**61, 2**62, n), pa.int64()),
        }
    )
    (inp,) = write_segments(rows, tmp_path, "hour", data_source="t", dimensions=["country"])
    table = pq.read_table(inp.path)
    pq.write_table(table, inp.path, write_statistics=["__time"])  # no statistics for the metrics
    assert pq.read_metadata(inp.path).row_group(0).column(2).statistics is None
    assert mapped_source.register(inp.path, mapped_copy(Path(inp.path)))
    try:
        before = SUMMED.segments
        got = run_to_json(
            parse_query(body([{"type": "longSum", "name": "v", "fieldName": "small"}], "all")), [inp]
        )
        assert got[0]["result"]["v"] == sum(rows.column("small").to_pylist())
        assert SUMMED.segments - before == 1
        with pytest.raises(duckdb.ConversionException, match="out of range"):  # the scan's error
            run_to_json(
                parse_query(body([{"type": "longSum", "name": "v", "fieldName": "huge"}], "all")), [inp]
            )
        assert SUMMED.segments - before == 1
    finally:
        mapped_source.unregister(inp.path)
