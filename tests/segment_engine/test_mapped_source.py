"""Segments served from memory-mapped Arrow copies answer as the same segments read from Parquet.

Four hourly segment files written here (one lacks a dimension, one has a metric as long where the
others have double, nulls in a dimension), queried through the engine once from Parquet and once
with each file's Arrow copy registered (`mapped_source`); both are checked against DuckDB SQL
written by hand over the raw rows, whole and with a query interval cutting segments (partial reads).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pytest

from historical_service.arrow_copy import mapped_copy
from strata.engine import SegmentInput, mapped_source, run_to_json
from strata.query import parse_query
from strata.storage.segment_file import write_segment_file
from timeline import Interval, SegmentDescriptor, format_instant

DS = "mapped"
HOUR = 3_600_000
START = 1_704_067_200_000  # 2024-01-01T00:00Z
VERSION = "2024-01-02T00:00:00.000Z"


def _rows(hour: int, count: int, *, dim: bool, long_v: bool, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    times = START + hour * HOUR + np.sort(rng.integers(0, HOUR, count))
    columns: dict[str, pa.Array] = {"__time": pa.array(times, pa.timestamp("ms", tz="UTC"))}
    if dim:
        names = [None if k == 0 else f"d{k}" for k in rng.integers(0, 7, count)]
        columns["dim"] = pa.array(names, pa.string())
    columns["other"] = pa.array([f"o{k}" for k in rng.integers(0, 3, count)], pa.string())
    columns["n"] = pa.array(rng.integers(0, 1000, count), pa.int64())
    values = rng.integers(0, 100, count) if long_v else rng.random(count) * 100
    columns["v"] = pa.array(values, pa.int64() if long_v else pa.float64())
    return pa.table(columns)


@pytest.fixture(scope="module")
def segments(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[SegmentInput, pa.Table]]:
    root = tmp_path_factory.mktemp("mapped")
    shapes = [(200, True, False), (150, False, True), (300, True, False), (250, True, False)]
    out = []
    for hour, (count, dim, long_v) in enumerate(shapes):
        table = _rows(hour, count, dim=dim, long_v=long_v, seed=hour)
        interval = Interval(START + hour * HOUR, START + (hour + 1) * HOUR)
        path = root / f"seg{hour}" / "index.parquet"
        path.parent.mkdir()
        dims = [{"name": d, "type": "string"} for d in ("dim", "other") if d in table.column_names]
        metrics = [{"type": "longSum", "name": "n", "fieldName": "n"}]
        facts = {"dataSource": DS, "interval": str(interval), "version": VERSION, "dimensions": dims,
                 "metrics": metrics, "queryGranularity": "none", "rollup": False}  # fmt: skip
        write_segment_file(table, path, facts)
        descriptor = SegmentDescriptor(interval, VERSION, 0)
        out.append((SegmentInput(f"{DS}_{hour}", descriptor, str(path), interval), table))
    return out


@pytest.fixture(params=["parquet", "arrow"])
def served(request: pytest.FixtureRequest, segments: list[tuple[SegmentInput, pa.Table]]) -> Iterator[str]:
    paths = [inp.path for inp, _ in segments]
    if request.param == "arrow":
        for path in paths:
            assert mapped_source.register(path, mapped_copy(Path(path)))
    try:
        yield request.param
    finally:
        for path in paths:
            mapped_source.unregister(path)


@pytest.fixture(scope="module")
def oracle(segments: list[tuple[SegmentInput, pa.Table]]) -> duckdb.DuckDBPyConnection:
    """The raw rows in DuckDB: missing columns null, `v` as double, `__time` as epoch ms."""
    conn = duckdb.connect()
    conn.execute("CREATE TABLE raw (t BIGINT, dim VARCHAR, other VARCHAR, n BIGINT, v DOUBLE)")
    for _, table in segments:
        conn.register("piece", table)
        dim = "dim" if "dim" in table.column_names else "NULL"
        conn.execute(f"INSERT INTO raw SELECT epoch_ms(__time), {dim}, other, n, v FROM piece")
        conn.unregister("piece")
    return conn


def _inputs(segments: list[tuple[SegmentInput, pa.Table]], start: int, end: int) -> list[SegmentInput]:
    """What a data node reads for query interval [start, end): each segment clipped to it."""
    out = []
    for inp, _ in segments:
        part = inp.interval.overlap(Interval(start, end))
        if part is not None and not part.is_empty:
            out.append(SegmentInput(inp.segment_id, inp.descriptor, inp.path, part))
    return out


WINDOWS = {"whole": (START, START + 4 * HOUR), "clipped": (START + HOUR // 2, START + 3 * HOUR - 1234)}


def _ask(segments: list[tuple[SegmentInput, pa.Table]], window: str, body: dict[str, Any]) -> list[Any]:
    start, end = WINDOWS[window]
    query = {"dataSource": DS, "intervals": [f"{format_instant(start)}/{format_instant(end)}"], **body}
    return run_to_json(parse_query(query), _inputs(segments, start, end))


def _where(window: str) -> str:
    start, end = WINDOWS[window]
    return f"t >= {start} AND t < {end}"


SUMS = [
    {"type": "count", "name": "rows"},
    {"type": "longSum", "name": "n", "fieldName": "n"},
    {"type": "doubleSum", "name": "v", "fieldName": "v"},
]


@pytest.mark.parametrize("window", list(WINDOWS))
def test_timeseries_by_hour(
    served: str, segments: Any, oracle: duckdb.DuckDBPyConnection, window: str
) -> None:
    got = _ask(segments, window, {"queryType": "timeseries", "granularity": "hour", "aggregations": SUMS})
    want = oracle.execute(
        f"SELECT t // {HOUR} * {HOUR} AS h, count(*), sum(n), sum(v) FROM raw WHERE {_where(window)} "
        "GROUP BY h ORDER BY h"
    ).fetchall()
    assert [
        (r["timestamp"], r["result"]["rows"], r["result"]["n"], round(r["result"]["v"], 6)) for r in got
    ] == [(format_instant(h), c, n, round(v, 6)) for h, c, n, v in want]


@pytest.mark.parametrize("window", list(WINDOWS))
def test_topn_over_a_dimension_with_nulls(
    served: str, segments: Any, oracle: duckdb.DuckDBPyConnection, window: str
) -> None:
    body = {"queryType": "topN", "granularity": "all", "dimension": "dim", "metric": "n", "threshold": 100,
            "aggregations": SUMS}  # fmt: skip
    got = _ask(segments, window, body)[0]["result"]
    want = oracle.execute(
        f"SELECT dim, count(*), sum(n) FROM raw WHERE {_where(window)} GROUP BY dim"
    ).fetchall()
    assert sorted((r["dim"] or "", r["rows"], r["n"]) for r in got) == sorted(
        (d or "", c, n) for d, c, n in want
    )
    assert [r["n"] for r in got] == sorted((n for _, _, n in want), reverse=True)


@pytest.mark.parametrize("window", list(WINDOWS))
def test_filtered_groupby(served: str, segments: Any, oracle: duckdb.DuckDBPyConnection, window: str) -> None:
    body = {"queryType": "groupBy", "granularity": "all", "dimensions": ["dim", "other"], "aggregations": SUMS,
            "filter": {"type": "in", "dimension": "other", "values": ["o0", "o2"]}}  # fmt: skip
    got = _ask(segments, window, body)
    want = oracle.execute(
        f"SELECT dim, other, count(*), sum(n), sum(v) FROM raw WHERE {_where(window)} AND other IN ('o0', 'o2') "
        "GROUP BY dim, other"
    ).fetchall()
    rows = [
        (e["dim"] or "", e["other"], e["rows"], e["n"], round(e["v"], 6)) for e in (r["event"] for r in got)
    ]
    assert sorted(rows) == sorted((d or "", o, c, n, round(v, 6)) for d, o, c, n, v in want)


@pytest.mark.parametrize("window", list(WINDOWS))
def test_scan_rows(served: str, segments: Any, oracle: duckdb.DuckDBPyConnection, window: str) -> None:
    body = {"queryType": "scan", "columns": ["__time", "dim", "n", "v"], "resultFormat": "compactedList",
            "filter": {"type": "selector", "dimension": "other", "value": "o1"}}  # fmt: skip
    got = [tuple(e) for batch in _ask(segments, window, body) for e in batch["events"]]
    want = oracle.execute(f"SELECT t, dim, n, v FROM raw WHERE {_where(window)} AND other = 'o1'").fetchall()
    assert sorted(got, key=repr) == sorted(want, key=repr)


def test_metadata_answers_match_parquet(segments: Any, oracle: duckdb.DuckDBPyConnection) -> None:
    """segmentMetadata, timeBoundary and search: the same with and without the Arrow copies."""
    queries: list[dict[str, Any]] = [
        {"queryType": "segmentMetadata", "analysisTypes": ["cardinality", "minmax", "size", "interval"]},
        {"queryType": "timeBoundary"},
        {"queryType": "search", "query": {"type": "contains", "value": "1"}},
    ]
    plain = [_ask(segments, w, q) for w in WINDOWS for q in queries]
    paths = [inp.path for inp, _ in segments]
    try:
        for path in paths:
            mapped_source.register(path, mapped_copy(Path(path)))
        assert [_ask(segments, w, q) for w in WINDOWS for q in queries] == plain
    finally:
        for path in paths:
            mapped_source.unregister(path)
    low, high = oracle.execute(f"SELECT min(t), max(t) FROM raw WHERE {_where('clipped')}").fetchone() or (
        0,
        0,
    )
    bounds = plain[len(queries) + 1][0]["result"]
    assert (bounds["minTime"], bounds["maxTime"]) == (format_instant(low), format_instant(high))
