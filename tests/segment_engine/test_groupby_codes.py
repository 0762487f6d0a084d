"""A node's merged groupBy partial grouped on dictionary codes answers as the grouping on strings.

Segment files written here and served from their Arrow copies (or not: a historical reading
Parquet), with two string dimensions holding nulls, dictionaries that differ per segment (values,
order, one reversed so codes rank opposite to strings), a segment without the second dimension,
and copies the code path must refuse (chunks with their own dictionaries, a dictionary repeating a
value), and copies sharing one dictionary (their codes used as they are). Each merged partial is checked against DuckDB SQL written by hand over the raw rows:
groups per (bucket, dim, dim2) under `all`, hour, day and 15-minute granularity, with and without
filters, whole and clipped windows; under `all` the bucket is the earliest cursor start among the
segments with matching rows.
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
from strata.engine import SegmentInput, mapped_source
from strata.engine.engine import run_merged
from strata.engine.groupby_codes import coded_groups
from strata.query import parse_query
from strata.query.duck import connection
from strata.query.groupby import GroupByQuery
from tests.segment_engine.coded_segments import HOUR, START, reencoded, write_hourly
from timeline import Interval, format_instant

DS = "coded_groups"
MINUTE = 60_000
SEGMENTS = 5
WITHOUT_DIM2 = 3  # the segment lacking `dim2`


def _rows(hour: int, seed: int) -> pa.Table:
    """`dim` d0..d9 (a per-segment shuffled subset, so dictionaries differ), `dim2` e0..e4, both
    with nulls; `n` small integers (none over 4 in segment 0), `v` doubles; rows from a few minutes into the hour."""
    rng = np.random.default_rng(seed)
    names = [f"d{k}" for k in rng.permutation(10)[: 5 + hour % 4]]
    others = [f"e{k}" for k in rng.permutation(5)[: 3 + hour % 3]]
    count = 150
    first = [None if rng.random() < 0.15 else names[k] for k in rng.integers(0, len(names), count)]
    second = [None if rng.random() < 0.2 else others[k] for k in rng.integers(0, len(others), count)]
    times = START + hour * HOUR + (7 + hour) * MINUTE + np.sort(rng.integers(0, 45 * MINUTE, count))
    columns: dict[str, pa.Array] = {
        "__time": pa.array(times, pa.timestamp("ms", tz="UTC")),
        "dim": pa.array(first, pa.string()),
    }
    if hour != WITHOUT_DIM2:
        columns["dim2"] = pa.array(second, pa.string())
    columns["n"] = pa.array(rng.integers(0, 5 if hour == 0 else 9, count), pa.int64())  # n > 4: not in 0
    columns["v"] = pa.array(rng.random(count) * 10, pa.float64())
    return pa.table(columns)


@pytest.fixture(scope="module")
def segments(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[SegmentInput, pa.Table]]:
    return write_hourly(
        tmp_path_factory.mktemp("coded_groups"), DS, [_rows(h, seed=h + 70) for h in range(SEGMENTS)]
    )


@pytest.fixture(scope="module")
def oracle(segments: list[tuple[SegmentInput, pa.Table]]) -> duckdb.DuckDBPyConnection:
    """The raw rows as one table `raw` (seg, t in epoch ms, dim2 null where a segment lacks it)."""
    pieces = []
    for inp, table in segments:
        dim2 = table.column("dim2") if "dim2" in table.column_names else pa.nulls(table.num_rows, pa.string())
        pieces.append(pa.table({
            "seg": pa.array([inp.segment_id] * table.num_rows, pa.string()),
            "t": table.column("__time").cast(pa.int64()), "dim": table.column("dim"), "dim2": dim2,
            "n": table.column("n"), "v": table.column("v"),
        }))  # fmt: skip
    conn = duckdb.connect()
    conn.register("raw", pa.concat_tables(pieces))
    return conn


def _shared(table: pa.Table) -> pa.Table:
    """`table` with `dim` and `dim2` on one dictionary of every value any segment has (sorted, with
    8-bit indices), so each copy's dictionary is the shared one."""
    for column, values in (("dim", [f"d{k}" for k in range(10)]), ("dim2", [f"e{k}" for k in range(5)])):
        if column in table.column_names:
            rows = table.column(column).cast(pa.string()).combine_chunks().to_pylist()
            indices = pa.array([None if v is None else values.index(v) for v in rows], pa.int8())
            encoded = pa.DictionaryArray.from_arrays(indices, pa.array(values, pa.string()))
            table = table.set_column(table.schema.get_field_index(column), column, encoded)
    return table


def _copy(path: str, how: str, position: int) -> pa.Table:
    table = mapped_copy(Path(path))
    if how == "same":
        return _shared(table)
    if how == "arrow":  # one copy with its dictionary reversed: codes rank opposite to strings
        return reencoded(table, "dim", reverse=True) if position == 1 else table
    if how == "split":  # chunks with their own dictionaries: the code path must refuse
        half = table.num_rows // 2
        return pa.concat_tables([reencoded(table.slice(0, half), "dim2", reverse=False),
                                 reencoded(table.slice(half), "dim2", reverse=True)])  # fmt: skip
    # "repeated": a dictionary holding each value twice, rows alternating between the two codes
    values = table.column("dim").cast(pa.string()).combine_chunks().to_pylist()
    uniques = sorted({v for v in values if v is not None})
    indices = [None if v is None else uniques.index(v) + (i % 2) * len(uniques) for i, v in enumerate(values)]
    encoded = pa.DictionaryArray.from_arrays(
        pa.array(indices, pa.int32()), pa.array(uniques * 2, pa.string())
    )
    return table.set_column(table.schema.get_field_index("dim"), "dim", encoded)


@pytest.fixture(params=["parquet", "arrow", "same", "split", "repeated"])
def served(request: pytest.FixtureRequest, segments: list[tuple[SegmentInput, pa.Table]]) -> Iterator[str]:
    paths = [inp.path for inp, _ in segments]
    if request.param != "parquet":
        for position, path in enumerate(paths):
            assert mapped_source.register(path, _copy(path, request.param, position))
    try:
        yield request.param
    finally:
        for path in paths:
            mapped_source.unregister(path)


WINDOWS = {
    "whole": (START, START + SEGMENTS * HOUR),
    "with_dims": (START, START + SEGMENTS * HOUR),
    "clipped": (START + HOUR // 2, START + 4 * HOUR - 777),
}
LEFT_OUT = {"with_dims": f"{DS}_{WITHOUT_DIM2}"}
GRANULARITIES = {"all": None, "hour": HOUR, "day": 24 * HOUR, "fifteen_minute": 15 * MINUTE}
FILTERS = [
    (None, "true"),
    ({"type": "bound", "dimension": "n", "lower": "3", "ordering": "numeric"}, "n >= 3"),
    ({"type": "bound", "dimension": "n", "lower": "5", "ordering": "numeric"}, "n >= 5"),  # not segment 0
    ({"type": "in", "dimension": "dim", "values": ["d1", "d4"]}, "dim IN ('d1', 'd4')"),
    ({"type": "selector", "dimension": "dim2", "value": "e2"}, "dim2 = 'e2'"),
]


def _query(window: str, granularity: str, flt: dict[str, Any] | None = None) -> GroupByQuery:
    start, end = WINDOWS[window]
    body: dict[str, Any] = {
        "queryType": "groupBy", "dataSource": DS, "granularity": granularity,
        "dimensions": ["dim", {"type": "default", "dimension": "dim2", "outputName": "second"}],
        "intervals": [f"{format_instant(start)}/{format_instant(end)}"],
        "aggregations": [{"type": "count", "name": "rows"}, {"type": "longSum", "name": "n", "fieldName": "n"},
                         {"type": "doubleSum", "name": "v", "fieldName": "v"}],
    }  # fmt: skip
    if flt is not None:
        body["filter"] = flt
    query = parse_query(body)
    assert isinstance(query, GroupByQuery)
    return query


def _inputs(segments: list[tuple[SegmentInput, pa.Table]], window: str) -> list[SegmentInput]:
    start, end = WINDOWS[window]
    out = []
    for inp, _ in segments:
        part = inp.interval.overlap(Interval(start, end))
        if LEFT_OUT.get(window) != inp.segment_id and part is not None and not part.is_empty:
            out.append(SegmentInput(inp.segment_id, inp.descriptor, inp.path, part))
    return out


def _expected(
    oracle: duckdb.DuckDBPyConnection, window: str, granularity: str, where: str
) -> set[tuple[Any, ...]]:
    start, end = WINDOWS[window]
    width = GRANULARITIES[granularity]
    # `all`: the earliest cursor start (the window clipped to the segment's first row) of the
    # segments with a matching row
    bucket = f"t // {width} * {width}" if width else "min(min(cursor)) OVER ()"
    rows = oracle.execute(
        f"""WITH cursors AS (SELECT seg, greatest({start}, min(t)) AS cursor FROM raw GROUP BY seg),
            picked AS (SELECT raw.*, cursor FROM raw JOIN cursors USING (seg)
                       WHERE t >= {start} AND t < {end} AND ({where}) AND seg != '{LEFT_OUT.get(window, "")}')
            SELECT {bucket} AS b, dim, dim2, count(*), sum(n), sum(v) FROM picked
            GROUP BY {"ALL" if width else "dim, dim2"}"""
    ).fetchall()
    return {(*r[:5], round(r[5], 6)) for r in rows}


def _got(table: pa.Table) -> set[tuple[Any, ...]]:
    assert table.column("__segment").null_count == table.num_rows  # one merged partial
    return {(r["__bucket"], r["d0"], r["d1"], r["a0"], r["a1"], round(r["a2"], 6)) for r in table.to_pylist()}


@pytest.mark.parametrize("window", list(WINDOWS))
@pytest.mark.parametrize("granularity", list(GRANULARITIES))
@pytest.mark.parametrize("flt,where", FILTERS)
def test_merged_partial_matches_grouping_on_strings(
    served: str, segments: Any, oracle: duckdb.DuckDBPyConnection, window: str, granularity: str,
    flt: dict[str, Any] | None, where: str,
) -> None:  # fmt: skip
    query = _query(window, granularity, flt)
    got = _got(run_merged(query, _inputs(segments, window)))
    assert got == _expected(oracle, window, granularity, where)


def test_code_path_taken_only_where_it_applies(served: str, segments: Any) -> None:
    """Whole segments from well-formed copies, all with both dimensions, take the code path; the
    rest (a segment read in part or without a dimension, copies the path refuses) the generic one."""
    for window in WINDOWS:
        for granularity in GRANULARITIES:
            query = _query(window, granularity)
            taken = coded_groups(query, connection(), _inputs(segments, window)) is not None
            assert taken == (served in ("arrow", "same") and window == "with_dims"), (
                served,
                window,
                granularity,
            )


def test_same_schema_as_the_generic_pass(segments: Any) -> None:
    """The coded partial has the generic pass's columns and types, so a broker merges the two alike."""
    from strata.engine.grouping import group_merged

    inputs = _inputs(segments, "with_dims")
    for position, inp in enumerate(inputs):
        assert mapped_source.register(inp.path, _copy(inp.path, "arrow", position))
    try:
        query = _query("with_dims", "hour")
        coded = coded_groups(query, connection(), inputs)
        assert coded is not None
        assert coded.schema == group_merged(query.plan, connection(), inputs).schema
    finally:
        for inp in inputs:
            mapped_source.unregister(inp.path)
