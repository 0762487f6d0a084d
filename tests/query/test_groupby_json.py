"""groupBy answers written from Arrow columns (`finalize_json`, strata.query.json_text) against the
bytes orjson prints for the rows `finalize` makes: every value type, escape and result shape."""

from __future__ import annotations

import random
import struct
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pytest

from strata.engine import run_merged, run_partials
from strata.engine.segment_input import SegmentInput
from strata.query import parse_query
from strata.query.aggregators import json_values
from strata.query.groupby import GroupByQuery
from strata.query.json_text import answer_json, column_texts
from tests.query.segment_fixtures import wikipedia_rows, write_segments

UNICODE = ["é", "日本語", "😀", "\u2028", "\x7f", "/"]
ESCAPES = ['"', "\\", "\n", "\t", "\r", "\b", "\f", "\x00", "\x1f", 'a"b\\c\nd']


def _old(arr: pa.Array) -> bytes:
    return orjson.dumps(json_values(arr), option=orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS)


def _new(arr: pa.Array) -> bytes:
    return b"[" + b",".join(column_texts(arr).to_pylist()) + b"]"


def _doubles(rng: random.Random, n: int) -> list[float | None]:
    specials = [0.0, -0.0, 1.0, 0.1, 1e16, 1e-7, 1e22, 123456789.0, 5e-324, 1.7976931348623157e308, 2.5]
    out: list[float | None] = []
    for _ in range(n):
        pick = rng.random()
        if pick < 0.1:
            out.append(None)
        elif pick < 0.4:
            out.append(rng.choice(specials))
        elif pick < 0.7:  # any finite bit pattern: subnormals, huge and tiny exponents
            v = struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0]
            out.append(v if np.isfinite(v) else 1.5)
        else:
            out.append(rng.uniform(-1e6, 1e6))
    return out


COLUMNS: dict[str, pa.Array] = {
    "long": pa.array([0, -1, None, 2**63 - 1, -(2**63), 42], pa.int64()),
    "int32": pa.array([1, None, -7], pa.int32()),
    "uint64": pa.array([2**64 - 1, 0, None], pa.uint64()),
    "bool": pa.array([True, False, None]),
    "string": pa.array(["plain", None, "", *UNICODE, *ESCAPES]),
    "string all plain": pa.array(["a", "b", None]),
    "large_string": pa.array(["x", None, *ESCAPES], pa.large_string()),
    "dictionary": pa.array(["b", None, "a\n", "b", "é"]).dictionary_encode(),
    "long array": pa.array([[1, None, 3], [], None, [None], [2**62]], pa.list_(pa.int64())),
    "string array": pa.array([["a", None], [], None, ESCAPES, UNICODE], pa.list_(pa.string())),
    "double array": pa.array([[1.5, None, float("nan")], None, [], [1e16, -0.0]], pa.list_(pa.float64())),
    "large list": pa.array([[1], None, [2, None]], pa.large_list(pa.int64())),
    "nested": pa.array([[[1, None], []], None, [None]], pa.list_(pa.list_(pa.int64()))),
    "double": pa.array(_doubles(random.Random(3), 5000), pa.float64()),
    "double no nulls": pa.array([0.1, 2.0, 3e-300], pa.float64()),
    "double non-finite": pa.array([1.0, float("nan"), None, float("inf"), -float("inf")], pa.float64()),
    "float": pa.array([0.1, None, 3.4028234663852886e38, 1.0, float("nan")], pa.float32()),
    "binary": pa.array([b"\x00\x01", None, b""], pa.binary()),
    "empty long": pa.array([], pa.int64()),
    "empty double": pa.array([], pa.float64()),
    "empty list": pa.array([], pa.list_(pa.int64())),
    "all null string": pa.array([None, None], pa.string()),
    "sliced": pa.array([[9], [1, 2], None, [3]], pa.list_(pa.int64())).slice(1, 3),
    "sliced string": pa.array(["z", 'q"', "y"]).slice(1),
}


@pytest.mark.parametrize("name", sorted(COLUMNS))
def test_column_texts_are_the_rows_bytes(name: str) -> None:
    arr = COLUMNS[name]
    assert _new(arr) == _old(arr)


SCHEMA_ROWS = 3000


def _merged(query: GroupByQuery, seed: int, dim_values: list[pa.Array], granularity_ms: int) -> pa.Table:
    """A merged partial of the query's plan: the given dimension columns, random intermediates."""
    rng = np.random.default_rng(seed)
    n = len(dim_values[0])
    schema = query.plan.schema(dim_types=[a.type for a in dim_values])
    columns: dict[str, pa.Array] = {}
    for f in schema:
        if f.name == "__segment":
            columns[f.name] = pa.nulls(n, pa.string())
        elif f.name == "__bucket":
            columns[f.name] = pa.array(1_442_016_000_000 + rng.integers(0, 5, n) * granularity_ms)
        elif f.name.startswith("d"):
            columns[f.name] = dim_values[int(f.name[1:])]
        elif pa.types.is_integer(f.type):
            columns[f.name] = pa.array(rng.integers(-1000, 10**12, n), f.type)
        else:
            values = rng.normal(0, 1e3, n)
            values[rng.random(n) < 0.05] = 0.1
            columns[f.name] = pa.array(values, f.type, mask=rng.random(n) < 0.05)
    return pa.table(columns, schema=schema)


def _dims(seed: int, n: int) -> list[pa.Array]:
    """A string dimension with escapes and unicode, and an ARRAY<LONG> one with null elements."""
    rng = random.Random(seed)
    pool = ["a", "b", "", *UNICODE, *ESCAPES]
    strings = [None if rng.random() < 0.05 else rng.choice(pool) + str(rng.randrange(50)) for _ in range(n)]
    arrays = [
        None if rng.random() < 0.05 else [None if rng.random() < 0.1 else rng.randrange(100)
                                          for _ in range(rng.randrange(4))]
        for _ in range(n)
    ]  # fmt: skip
    return [pa.array(strings, pa.string()), pa.array(arrays, pa.list_(pa.int64()))]


def _query(**fields: Any) -> GroupByQuery:
    base = {
        "queryType": "groupBy",
        "dataSource": "t",
        "intervals": ["2015-09-12/2015-09-13"],
        "granularity": "all",
        "dimensions": [
            "s",
            {"type": "default", "dimension": "n", "outputName": "n", "outputType": "ARRAY<LONG>"},
        ],
        "aggregations": [
            {"type": "count", "name": "rows"},
            {"type": "doubleSum", "name": "d", "fieldName": "x"},
            {"type": "floatSum", "name": "f", "fieldName": "x"},
            {"type": "longMax", "name": 'escaped "name"\n', "fieldName": "y"},
        ],
    }
    query = parse_query({**base, **fields})
    assert isinstance(query, GroupByQuery)
    return query


RATIO = {
    "type": "arithmetic",
    "name": "ratio",
    "fn": "/",
    "fields": [{"type": "fieldAccess", "fieldName": "d"}, {"type": "fieldAccess", "fieldName": "rows"}],
}
SHAPES: dict[str, dict[str, Any]] = {
    "default": {},
    "hour": {"granularity": "hour"},
    "hour in a time zone": {"granularity": {"type": "period", "period": "PT1H", "timeZone": "Asia/Kolkata"}},
    "postAggregations": {"postAggregations": [RATIO]},
    "having": {"having": {"type": "greaterThan", "aggregation": "d", "value": 0}},
    "limitSpec": {
        "limitSpec": {
            "type": "default",
            "limit": 50,
            "offset": 3,
            "columns": [{"dimension": "d", "direction": "descending"}, "n"],
        },
    },
    "limitSpec on arrays": {"limitSpec": {"type": "default", "limit": 1000, "columns": ["n"]}},
    "resultAsArray": {"context": {"resultAsArray": True}},
    "resultAsArray by hour": {"granularity": "hour", "context": {"resultAsArray": True}},
    "not finalized": {"context": {"finalize": False}},
    "having drops all": {"having": {"type": "greaterThan", "aggregation": "rows", "value": 10**13}},
    "subtotals": {"subtotalsSpec": [["s"], []]},
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("rows_per_pass", [7, 1 << 16])
def test_groupby_json_is_the_rows_bytes(
    shape: str, rows_per_pass: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("strata.query.groupby.ROWS_PER_PASS", rows_per_pass)
    query = _query(**SHAPES[shape])
    merged = _merged(query, 11, _dims(11, SCHEMA_ROWS), 3_600_000)
    expected = answer_json(query.finalize(merged))
    assert query.finalize_json(merged) == expected
    assert len(orjson.loads(expected)) > 0 or shape == "having drops all"


@pytest.mark.parametrize(
    "fields", [{}, {"dimensions": []}, {"dimensions": [], "limitSpec": {"type": "default", "offset": 1}}]
)
def test_empty_and_summary_answers(fields: dict[str, Any]) -> None:
    """No groups: `[]`, or with no dimensions Druid's one summary row."""
    query = _query(**fields)
    empty = query.plan.empty()
    assert query.finalize_json(empty) == answer_json(query.finalize(empty))


def test_subtotals_of_no_groups_are_no_rows() -> None:
    """qaUnnest/array_sql_group_by.04.std.iq line 12 on: GROUP BY ROLLUP / CUBE over no rows is no
    rows in Druid, not even the grand total the `[]` subtotal would be on its own."""
    query = _query(subtotalsSpec=[["s"], []])
    empty = query.plan.empty()
    assert query.finalize(empty) == []
    assert query.finalize_json(empty) == b"[]"


@pytest.fixture(scope="module")
def segments(tmp_path_factory: pytest.TempPathFactory) -> list[SegmentInput]:
    return write_segments(wikipedia_rows(), tmp_path_factory.mktemp("gb_json_wiki"))


@pytest.mark.parametrize("granularity", ["all", "hour"])
def test_wikipedia_groupby_bytes(segments: list[SegmentInput], granularity: str) -> None:
    """Real partials of real rows (unicode pages, nulls), merged as a broker merges them."""
    query = parse_query({
        "queryType": "groupBy", "dataSource": "wiki", "intervals": ["2015-09-12/2015-09-13"],
        "granularity": granularity, "dimensions": ["channel", "page", "isRobot"],
        "aggregations": [{"type": "count", "name": "edits"},
                         {"type": "doubleSum", "name": "delta", "fieldName": "delta"}],
        "postAggregations": [{"type": "arithmetic", "name": "per", "fn": "/",
                              "fields": [{"type": "fieldAccess", "fieldName": "delta"},
                                         {"type": "fieldAccess", "fieldName": "edits"}]}],
    })  # fmt: skip
    merged = query.merge([run_partials(query, segments[i::3]) for i in range(3)])
    assert merged.num_rows > 1000
    assert query.finalize_json(merged) == answer_json(query.finalize(merged))


@pytest.mark.parametrize("granularity", ["all", "hour"])
def test_one_data_nodes_merged_partial_is_taken_as_it_is(
    segments: list[SegmentInput], granularity: str
) -> None:
    """A broker gathering one data node's merged partial finalizes it without merging it again, and
    answers what merging the per-segment partials answers."""
    query = parse_query({
        "queryType": "groupBy", "dataSource": "wiki", "intervals": ["2015-09-12/2015-09-13"],
        "granularity": granularity, "dimensions": ["channel", "isRobot"],
        "aggregations": [{"type": "count", "name": "edits"},
                         {"type": "longSum", "name": "added", "fieldName": "added"}],
    })  # fmt: skip
    node_merged = run_merged(query, segments)
    assert node_merged.column("__segment").null_count == node_merged.num_rows > 10
    taken = query.merge_gathered([node_merged], one_node_merged=True)
    assert taken.num_rows == node_merged.num_rows
    per_segment = query.merge([run_partials(query, segments)])
    assert query.finalize_json(taken) == query.finalize_json(per_segment)
