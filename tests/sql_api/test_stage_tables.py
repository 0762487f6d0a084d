"""A scan stage handed to the broker's engine as Arrow (strata.sql.stage_tables) is the table the
JSON path gives it: the native answer's JSON made into rows and the rows into Arrow
(`strata.sql.composed`). Where a column would change on that path, the Arrow path declines."""

from __future__ import annotations

import math
from typing import Any

import orjson
import pyarrow as pa
import pytest

from strata.query import parse_query
from strata.query.errors import ResourceLimitExceeded
from strata.query.scan import ScanQuery
from strata.sql.composed import _arrow
from strata.sql.plan import Output, SqlPlan
from strata.sql.stage_tables import stage_table, takes_table

NAMES = ["__time", "page", "added", "ratio", "weight", "absent"]
KINDS = ["LONG", "STRING", "LONG", "DOUBLE", "FLOAT", "STRING"]


def _plan(outputs: list[Output], **more: Any) -> tuple[SqlPlan, ScanQuery]:
    native = {"queryType": "scan", "dataSource": "t", "intervals": ["1000/3000"],
              "columns": [o.source for o in outputs], "resultFormat": "compactedList"}  # fmt: skip
    query = parse_query(native)
    assert isinstance(query, ScanQuery)
    return SqlPlan(outputs, native, raw_times=True, row_bound=more.pop("row_bound", 100), **more), query


def _outputs() -> list[Output]:
    return [Output(n, n, k) for n, k in zip(NAMES, KINDS, strict=True)]


def _partial(**columns: pa.Array) -> pa.Table:
    base: dict[str, pa.Array] = {
        "__segment": pa.array(["s1", "s1", "s2"]),
        "__time": pa.array([1442016000000, 1442016001000, 1442019600000], pa.int64()),
        "page": pa.array(["a", None, 'Ünïcode "quoted"']),
        "added": pa.array([1, None, -(2**40)], pa.int64()),
        "ratio": pa.array([0.1, None, 1e300], pa.float64()),
        "weight": pa.array([0.1, 2.5, None], pa.float32()),
    }
    return pa.table({**base, **columns})


def _json_path(plan: SqlPlan, query: ScanQuery, merged: pa.Table) -> pa.Table:
    """The table the broker's engine got before: JSON, rows, Arrow."""
    return _arrow(plan.rows(orjson.loads(query.finalize_json(merged))), plan.outputs)


def test_a_plain_scan_stage_is_the_json_paths_table() -> None:
    plan, query = _plan(_outputs())
    assert takes_table(plan)
    merged = query.merge([_partial()])
    table = stage_table(plan, query.answer_table(merged))
    assert table is not None
    expected = _json_path(plan, query, merged)
    assert table.schema == expected.schema
    assert table.to_pylist() == expected.to_pylist()


def test_dictionary_and_large_strings_are_plain_strings() -> None:
    plan, query = _plan(_outputs())
    page = pa.array(["a", None, "b"]).dictionary_encode()
    for column in (page, pa.array(["a", None, "b"], pa.large_string())):
        merged = query.merge([_partial(page=column)])
        table = stage_table(plan, query.answer_table(merged))
        assert table is not None
        assert table.column("page").type == pa.string()
        assert table.to_pylist() == _json_path(plan, query, merged).to_pylist()


@pytest.mark.parametrize(
    ("column", "values"),
    [
        ("page", pa.array([1, 2, 3], pa.int64())),  # a STRING column stored as numbers: stringified
        ("added", pa.array([1.5, 2.0, None], pa.float64())),  # a LONG column stored as doubles
        ("page", pa.array([["x", "y"], None, ["z"]])),  # a multi-value string
        ("__time", pa.array(["2015-09-12T00:00:00.000Z"] * 3)),  # times as text
    ],
)
def test_a_column_the_json_path_would_change_takes_that_path(column: str, values: pa.Array) -> None:
    plan, query = _plan(_outputs())
    assert stage_table(plan, query.answer_table(query.merge([_partial(**{column: values})]))) is None


def test_nan_and_infinities_are_kept_on_both_paths() -> None:
    """The native answer spells them as Druid's JSON writer does ("NaN", "-Infinity"), and the
    JSON path reads them back as doubles: an infinite LN or a NaN ASIN is no null."""
    plan, query = _plan(_outputs())
    ratio = pa.array([float("nan"), -math.inf, math.inf], pa.float64())
    merged = query.merge([_partial(ratio=ratio, weight=pa.array([math.inf, None, 1.0], pa.float32()))])
    assert orjson.loads(query.finalize_json(merged))[0]["events"][0][3] == "NaN"
    table = stage_table(plan, query.answer_table(merged))
    assert table is not None
    for got in (table, _json_path(plan, query, merged)):
        assert str(got.column("ratio").to_pylist()) == "[nan, -inf, inf]"
        assert got.column("weight").to_pylist() == [math.inf, None, 1.0]


def test_booleans_nested_values_and_reordered_stages_take_the_json_path() -> None:
    flagged = [*_outputs()[:-1], Output("flag", "added", "LONG", sql_type_name="BOOLEAN")]
    plan, query = _plan(flagged)
    assert stage_table(plan, query.answer_table(query.merge([_partial()]))) is None
    nested = [*_outputs()[:-1], Output("tags", "tags", "ARRAY<STRING>")]
    plan, query = _plan(nested)
    assert stage_table(plan, query.answer_table(query.merge([_partial()]))) is None
    for cut in ({"order": [(1, False)]}, {"offset": 1}, {"limit": 2}, {"empty_row": True}):
        assert not takes_table(_plan(_outputs(), **cut)[0])
    assert not takes_table(SqlPlan(_outputs(), {"queryType": "groupBy"}, raw_times=True))


def test_an_offset_and_limit_cut_the_answer_as_finalize_does() -> None:
    plan, _ = _plan(_outputs())
    native = {**plan.native, "offset": 1, "limit": 1}  # type: ignore[dict-item]
    query = parse_query(native)
    assert isinstance(query, ScanQuery)
    merged = query.merge([_partial()])
    table = stage_table(plan, query.answer_table(merged))
    assert table is not None and table.num_rows == 1
    assert table.to_pylist() == _json_path(plan, query, merged).to_pylist()


def test_past_the_row_bound_is_druids_resource_limit() -> None:
    plan, query = _plan(_outputs(), row_bound=2)
    with pytest.raises(ResourceLimitExceeded, match="maximum\\[2\\] rows"):
        stage_table(plan, query.answer_table(query.merge([_partial()])))
