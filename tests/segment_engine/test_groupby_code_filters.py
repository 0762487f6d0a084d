"""A node's coded groupBy with its filter decided on dictionary codes answers as the filter on strings.

Each term of the filter's top-level AND that reads one string column alone is evaluated once over
that column's shared dictionary and applied to rows by code. Segment files written here and served
from their Arrow copies (as a historical writes them, and with one copy's dictionary reversed so
its codes rank opposite to strings): `dim` with 40 values, null-heavy in one segment, absent values
in each segment's dictionary; `dim2` with a few values. Each merged partial is checked against
DuckDB SQL written by hand over the raw rows, for `in` (with null, with values no segment holds),
selector on null, `not`, bounds (with and without a lower bound, so nulls match or not), like,
regex, scattered sets (a boolean per row looked up by code), terms on a column only filtered on,
and an `or` across columns (left on the strings).
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
from strata.engine import SegmentInput, code_filters, dictionary_codes, groupby_codes, mapped_source
from strata.engine.engine import run_merged
from strata.engine.groupby_codes import coded_groups
from strata.query import parse_query
from strata.query.duck import connection
from strata.query.groupby import GroupByQuery
from tests.segment_engine.coded_segments import HOUR, START, reencoded, write_hourly
from timeline import format_instant

DS = "code_filters"
SEGMENTS = 4
NULL_HEAVY = 2  # the segment where most of `dim` is null
VALUES = [f"d{k:02d}" for k in range(40)]


def _rows(hour: int, seed: int) -> pa.Table:
    """`dim`: a per-segment subset of 30 of the 40 values (so each segment lacks some), null 10% of
    the time (80% in the null-heavy segment); `dim2` e0..e3 with some null; `n` small integers."""
    rng = np.random.default_rng(seed)
    names = [VALUES[k] for k in sorted(rng.permutation(40)[:30])]
    count = 400
    nulls = 0.8 if hour == NULL_HEAVY else 0.1
    first = [None if rng.random() < nulls else names[k] for k in rng.integers(0, len(names), count)]
    second = [None if rng.random() < 0.15 else f"e{k}" for k in rng.integers(0, 4, count)]
    times = START + hour * HOUR + np.sort(rng.integers(0, HOUR, count))
    return pa.table({
        "__time": pa.array(times, pa.timestamp("ms", tz="UTC")),
        "dim": pa.array(first, pa.string()), "dim2": pa.array(second, pa.string()),
        "n": pa.array(rng.integers(0, 9, count), pa.int64()),
    })  # fmt: skip


@pytest.fixture(scope="module")
def segments(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[SegmentInput, pa.Table]]:
    return write_hourly(
        tmp_path_factory.mktemp("code_filters"), DS, [_rows(h, seed=h + 90) for h in range(SEGMENTS)]
    )


@pytest.fixture(scope="module")
def oracle(segments: list[tuple[SegmentInput, pa.Table]]) -> duckdb.DuckDBPyConnection:
    conn = duckdb.connect()
    conn.register("raw", pa.concat_tables([t for _, t in segments]))
    return conn


@pytest.fixture(scope="module", params=["arrow", "reversed"])
def served(request: pytest.FixtureRequest, segments: list[tuple[SegmentInput, pa.Table]]) -> Iterator[str]:
    paths = [inp.path for inp, _ in segments]
    for position, path in enumerate(paths):
        copy = mapped_copy(Path(path))
        assert mapped_source.register(
            path, reencoded(copy, "dim", reverse=True) if request.param == "reversed" and position else copy
        )
    try:
        yield request.param
    finally:
        for path in paths:
            mapped_source.unregister(path)


EVERY_OTHER = VALUES[::2]  # 20 runs of one code: past the ranges, a boolean per row
FILTERS: list[tuple[dict[str, Any], str]] = [
    ({"type": "in", "dimension": "dim", "values": ["d01", "d07", "zz-absent"]}, "dim IN ('d01', 'd07')"),
    ({"type": "in", "dimension": "dim", "values": ["d03", None]}, "dim = 'd03' OR dim IS NULL"),
    ({"type": "in", "dimension": "dim", "values": ["zz-absent"]}, "FALSE"),
    ({"type": "selector", "dimension": "dim", "value": None}, "dim IS NULL"),
    (
        {"type": "not", "field": {"type": "in", "dimension": "dim", "values": ["d01", "d02"]}},
        "dim NOT IN ('d01', 'd02')",
    ),
    ({"type": "not", "field": {"type": "null", "column": "dim"}}, "dim IS NOT NULL"),
    (
        {"type": "bound", "dimension": "dim", "lower": "d10", "upper": "d20", "upperStrict": True},
        "dim >= 'd10' AND dim < 'd20'",
    ),
    ({"type": "bound", "dimension": "dim", "upper": "d05"}, "dim IS NULL OR dim <= 'd05'"),
    ({"type": "like", "dimension": "dim", "pattern": "d1%"}, "dim LIKE 'd1%'"),
    ({"type": "regex", "dimension": "dim", "pattern": "^d(0[1-3]|3)"}, "regexp_matches(dim, '^d(0[1-3]|3)')"),
    (
        {"type": "in", "dimension": "dim", "values": EVERY_OTHER},
        f"dim IN ({', '.join(repr(v) for v in EVERY_OTHER)})",
    ),
    (
        {"type": "in", "dimension": "dim", "values": [*EVERY_OTHER, None]},
        f"dim IN ({', '.join(repr(v) for v in EVERY_OTHER)}) OR dim IS NULL",
    ),
    (
        {"type": "not", "field": {"type": "in", "dimension": "dim", "values": EVERY_OTHER}},
        f"dim NOT IN ({', '.join(repr(v) for v in EVERY_OTHER)})",
    ),
    (
        {
            "type": "and",
            "fields": [
                {"type": "in", "dimension": "dim", "values": ["d01", "d04", "d09", "d30"]},
                {
                    "type": "and",
                    "fields": [
                        {"type": "selector", "dimension": "dim2", "value": "e1"},
                        {"type": "bound", "dimension": "n", "lower": "3", "ordering": "numeric"},
                    ],
                },
            ],
        },
        "dim IN ('d01', 'd04', 'd09', 'd30') AND dim2 = 'e1' AND n >= 3",
    ),
    (
        {
            "type": "or",
            "fields": [
                {"type": "selector", "dimension": "dim", "value": "d03"},
                {"type": "selector", "dimension": "dim2", "value": "e2"},
            ],
        },
        "dim = 'd03' OR dim2 = 'e2'",
    ),
]


def _query(dimensions: list[str], flt: dict[str, Any]) -> GroupByQuery:
    body = {
        "queryType": "groupBy", "dataSource": DS, "granularity": "all", "dimensions": dimensions,
        "intervals": [f"{format_instant(START)}/{format_instant(START + SEGMENTS * HOUR)}"],
        "aggregations": [{"type": "count", "name": "rows"}, {"type": "longSum", "name": "n", "fieldName": "n"}],
        "filter": flt,
    }  # fmt: skip
    query = parse_query(body)
    assert isinstance(query, GroupByQuery)
    return query


def _inputs(segments: list[tuple[SegmentInput, pa.Table]]) -> list[SegmentInput]:
    return [inp for inp, _ in segments]


def _expected(oracle: duckdb.DuckDBPyConnection, dimensions: list[str], where: str) -> set[tuple[Any, ...]]:
    keys = ", ".join(dimensions)
    rows = oracle.execute(
        f"SELECT {keys}, count(*), sum(n) FROM raw WHERE {where} GROUP BY {keys}"
    ).fetchall()
    return set(rows)


def _got(table: pa.Table, dimensions: list[str]) -> set[tuple[Any, ...]]:
    names = [f"d{i}" for i in range(len(dimensions))]
    return {(*(r[n] for n in names), r["a0"], r["a1"]) for r in table.to_pylist()}


@pytest.mark.parametrize("dimensions", [["dim", "dim2"], ["dim2"]], ids=["grouped", "only_filtered"])
@pytest.mark.parametrize("flt,where", FILTERS, ids=[str(i) for i in range(len(FILTERS))])
def test_filter_on_codes_matches_filter_on_strings(
    served: str, segments: Any, oracle: duckdb.DuckDBPyConnection, dimensions: list[str],
    flt: dict[str, Any], where: str,
) -> None:  # fmt: skip
    query = _query(dimensions, flt)
    coded = coded_groups(query, connection(), _inputs(segments))
    assert coded is not None  # the code path answers it
    assert _got(coded, dimensions) == _expected(oracle, dimensions, where)
    assert _got(run_merged(query, _inputs(segments)), dimensions) == _expected(oracle, dimensions, where)


def test_terms_on_one_column_read_no_strings(
    served: str, segments: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A term reading `dim` alone is decided on its codes: the rows' strings are not read (an `or`
    across columns still reads them); a scattered set goes through a boolean per row."""
    read: list[list[str]] = []
    masks: list[int] = []
    real_mask = code_filters.code_mask

    def spy_view(rows: Any, columns: list[str], **kwargs: Any) -> str:
        read.append(list(columns))
        return mapped_source.view(rows, columns, **kwargs)

    def spy_mask(*args: Any) -> pa.ChunkedArray:
        masks.append(1)
        return real_mask(*args)

    monkeypatch.setattr(groupby_codes, "view", spy_view)
    monkeypatch.setattr(groupby_codes, "code_mask", spy_mask)
    for flt, _ in FILTERS:
        read.clear()
        masks.clear()
        assert coded_groups(_query(["dim2"], flt), connection(), _inputs(segments)) is not None
        assert ("dim" in read[0]) == (flt["type"] == "or"), flt
        scattered = EVERY_OTHER[0] in str(flt) and EVERY_OTHER[-1] in str(flt)
        assert bool(masks) == scattered, flt


@pytest.mark.parametrize(
    "kept,null_kept,expected",
    [
        ([], False, "FALSE"),
        ([], True, '(FALSE OR "c" IS NULL)'),
        ([0, 1, 2, 3, 4], False, '"c" IS NOT NULL'),
        ([1, 2, 4], False, '("c" BETWEEN 1 AND 2 OR "c" = 4)'),
        ([0, 1, 3, 4], True, '(NOT ("c" = 2) OR "c" IS NULL)'),
    ],
)
def test_code_condition(kept: list[int], null_kept: bool, expected: str) -> None:
    assert code_filters.code_condition("c", np.array(kept, np.int64), 5, null_kept) == expected


def test_a_column_only_filtered_on_is_coded_where_its_values_are_few() -> None:
    """Building a shared dictionary of nearly unique values would cost more than the string
    comparisons it saves: such a column is filtered on its strings."""
    table = pa.table({"few": pa.array(["x", "y"] * 8).dictionary_encode(),
                      "many": pa.array([f"v{i}" for i in range(16)]).dictionary_encode()})  # fmt: skip
    path = "few-values/index.parquet"
    assert mapped_source.register(path, table)
    try:
        rows = mapped_source.mapped(path)
        assert rows is not None
        assert dictionary_codes.few_values([rows], "few")
        assert not dictionary_codes.few_values([rows], "many")
    finally:
        mapped_source.unregister(path)
