"""SQL bodies written from a groupBy's Arrow columns (strata.sql.arrow_answer) against the old way:
the native answer's JSON parsed, `SqlPlan.rows`, `encode_rows`. Byte for byte, over generated
answers: every value type (arrays of strings, longs and doubles with null elements, escapes,
unicode), timestamps in zones, BOOLEANs, empty answers, every result format and header."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pytest

from strata.query import parse_query
from strata.query.groupby import GroupByQuery
from strata.sql import encode_rows
from strata.sql.arrow_answer import SqlAnswer, sql_answer
from strata.sql.filters import TIME
from strata.sql.formats import RESULT_FORMATS
from strata.sql.plan import Output, SqlPlan
from tests.query.test_groupby_json import ESCAPES, UNICODE, _merged

ROWS = 700
HEADERS = [
    (False, False, False),
    (True, False, False),
    (True, True, False),
    (True, False, True),
    (True, True, True),
]
STRING_POOL = ["a", "", "b,c", 'say "hi"', "line\nbreak", "cr\rx", *UNICODE, *ESCAPES]


def _query(granularity: Any = "all", **fields: Any) -> GroupByQuery:
    array = {"type": "default", "outputType": "ARRAY<LONG>"}
    query = parse_query({
        "queryType": "groupBy", "dataSource": "t", "intervals": ["2015-09-12/2015-09-13"],
        "granularity": granularity,
        "dimensions": ["s", {**array, "dimension": "n", "outputName": "n"},
                       {**array, "dimension": "t", "outputName": "t", "outputType": "ARRAY<STRING>"},
                       {**array, "dimension": "x", "outputName": "x", "outputType": "ARRAY<DOUBLE>"}],
        "aggregations": [{"type": "count", "name": "rows"},
                         {"type": "doubleSum", "name": "d", "fieldName": "x"},
                         {"type": "floatSum", "name": "f", "fieldName": "x"},
                         {"type": "longMax", "name": "mx", "fieldName": "y"},
                         {"type": "longSum", "name": "flag", "fieldName": "y"},
                         {"type": "doubleSum", "name": "dflag", "fieldName": "x"}],
        "postAggregations": [{"type": "arithmetic", "name": "ratio", "fn": "/",
                              "fields": [{"type": "fieldAccess", "fieldName": "d"},
                                         {"type": "fieldAccess", "fieldName": "rows"}]}],
        **fields,
    })  # fmt: skip
    assert isinstance(query, GroupByQuery)
    return query


def _dims(seed: int, n: int) -> list[pa.Array]:
    rng = random.Random(seed)

    def listed(make: Any) -> list[Any]:
        return [
            None
            if rng.random() < 0.05
            else [None if rng.random() < 0.15 else make() for _ in range(rng.randrange(4))]
            for _ in range(n)
        ]

    strings = [
        None if rng.random() < 0.05 else rng.choice(STRING_POOL) + str(rng.randrange(9)) for _ in range(n)
    ]
    doubles = [0.1, -0.0, 1e16, 2.5, 1e-7, float("nan")]
    return [
        pa.array(strings, pa.string()),
        pa.array(listed(lambda: rng.randrange(-5, 100)), pa.list_(pa.int64())),
        pa.array(listed(lambda: rng.choice(STRING_POOL)), pa.list_(pa.string())),
        pa.array(listed(lambda: rng.choice(doubles)), pa.list_(pa.float64())),
    ]


def _answer(query: GroupByQuery, seed: int = 5, rows: int = ROWS) -> pa.Table:
    """A merged partial with BOOLEAN-read sums of 0, 1, 5 and null."""
    merged = _merged(query, seed, _dims(seed, rows), 3_600_000)
    rng = np.random.default_rng(seed)
    for name, kind in (("a4", pa.int64()), ("a5", pa.float64())):
        values = rng.choice([0, 1, 5], rows)
        column = pa.array(values, kind, mask=rng.random(rows) < 0.1)
        merged = merged.set_column(merged.schema.get_field_index(name), name, column)
    return merged


OUTPUTS = [
    Output("__time", TIME, "LONG"),
    Output("s", "s", "STRING"),
    Output("n", "n", "ARRAY<LONG>"),
    Output("t", "t", "ARRAY<STRING>"),
    Output("x", "x", "ARRAY<DOUBLE>"),
    Output("rows", "rows", "LONG"),
    Output("d", "d", "DOUBLE"),
    Output("f", "f", "FLOAT"),
    Output("latest", "mx", "LONG", timestamp=True),
    Output("day", "mx", "LONG", timestamp=True, sql_type_name="DATE"),
    Output("flag", "flag", "LONG", sql_type_name="BOOLEAN"),
    Output("dflag", "dflag", "DOUBLE", sql_type_name="BOOLEAN"),
    Output("ratio", "ratio", "DOUBLE"),
    Output("absent", "nope", "STRING"),
    Output('we"ird\n名', "rows", "LONG"),
]


def _old(plan: SqlPlan, query: GroupByQuery, merged: pa.Table, encoding: dict[str, Any]) -> bytes:
    """The old way: the merge worker's native JSON, parsed, made into rows, encoded."""
    rows = plan.rows(orjson.loads(query.finalize_json(merged)))
    names, types = [o.name for o in plan.outputs], [o.druid_type for o in plan.outputs]
    return encode_rows(rows, names, types, [o.sql_type for o in plan.outputs], **encoding)[0]


def _new(plan: SqlPlan, query: GroupByQuery, merged: pa.Table, encoding: dict[str, Any]) -> bytes:
    writer = sql_answer(plan, encoding)
    assert writer is not None and writer.takes(query)
    return writer.body(query, merged)


def _encoding(fmt: str, headers: tuple[bool, bool, bool], stringify: bool) -> dict[str, Any]:
    header, types_header, sql_types_header = headers
    return {
        "fmt": fmt,
        "header": header,
        "types_header": types_header,
        "sql_types_header": sql_types_header,
        "stringify_arrays": stringify,
    }


@pytest.mark.parametrize("fmt", RESULT_FORMATS)
@pytest.mark.parametrize("headers", HEADERS)
@pytest.mark.parametrize("stringify", [True, False])
@pytest.mark.parametrize(
    ("granularity", "zone"),
    [
        ("all", None),
        ({"type": "period", "period": "PT1H", "timeZone": "Asia/Kolkata"}, "America/Los_Angeles"),
    ],
)
def test_body_is_the_old_bytes(
    fmt: str, headers: tuple[bool, bool, bool], stringify: bool, granularity: Any, zone: str | None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.setattr("strata.sql.arrow_answer.ROWS_PER_PASS", 97)
    query = _query(granularity)
    merged = _answer(query)
    plan = SqlPlan(list(OUTPUTS), query.to_json(), time_zone=zone)
    encoding = _encoding(fmt, headers, stringify)
    expected = _old(plan, query, merged, encoding)
    assert _new(plan, query, merged, encoding) == expected
    assert expected.count(b"\\u0000") > 0 or fmt == "csv"  # the escapes reached the body


@pytest.mark.parametrize("fmt", RESULT_FORMATS)
@pytest.mark.parametrize("headers", [(False, False, False), (True, True, True)])
def test_empty_answer(fmt: str, headers: tuple[bool, bool, bool]) -> None:
    query = _query(having={"type": "greaterThan", "aggregation": "rows", "value": 10**13})
    merged = _answer(query)
    plan = SqlPlan(list(OUTPUTS), query.to_json())
    encoding = _encoding(fmt, headers, True)
    assert _new(plan, query, merged, encoding) == _old(plan, query, merged, encoding)


@pytest.mark.parametrize("fmt", RESULT_FORMATS)
@pytest.mark.parametrize("source", ["s", "t", "n", "rows", "absent"])
def test_one_column(fmt: str, source: str) -> None:
    """A row of one field: an empty CSV field is quoted (`""`), so that the row is not blank."""
    query = _query(limitSpec={"type": "default", "limit": 300, "columns": ["s"]})
    merged = _answer(query, seed=8)
    kinds = {"s": "STRING", "t": "ARRAY<STRING>", "n": "ARRAY<LONG>", "rows": "LONG", "absent": "STRING"}
    plan = SqlPlan([Output("only", source, kinds[source])], query.to_json())
    for stringify in (True, False):
        encoding = _encoding(fmt, (True, False, False), stringify)
        assert _new(plan, query, merged, encoding) == _old(plan, query, merged, encoding)


def test_csv_quoting_of_any_text() -> None:
    """Python's csv writer quotes a field with a comma, a quote, CR or LF, and nothing else."""
    rng = random.Random(1)
    alphabet = [",", '"', "\r", "\n", " ", "'", "\t", ";", "a", "é", "\x00", "\\"]
    strings = ["".join(rng.choice(alphabet) for _ in range(rng.randrange(5))) for _ in range(2000)]
    query = _query(dimensions=["s"])
    merged = _merged(query, 2, [pa.array([*strings, None])], 3_600_000)
    for outputs in ([Output("s", "s", "STRING")], [Output("s", "s", "STRING"), Output("r", "rows", "LONG")]):
        plan = SqlPlan(outputs, query.to_json())
        encoding = _encoding("csv", (False, False, False), True)
        assert _new(plan, query, merged, encoding) == _old(plan, query, merged, encoding)


def test_python_values_and_non_finite_doubles() -> None:
    """Columns the kernels leave to Python: a COMPLEX<json> dimension (Python values), doubles with
    NaN and infinities (spelled as Druid spells them), a BOOLEAN read from doubles."""
    query = _query(
        dimensions=[{"type": "default", "dimension": "j", "outputName": "j", "outputType": "COMPLEX<json>"}]
    )
    texts = ['{"a":1}', "[1,2]", '"x"', None, "3.5", '{"b":[true,null]}']
    merged = _merged(query, 4, [pa.array([texts[i % len(texts)] for i in range(60)])], 3_600_000)
    sums = pa.array([float("nan"), float("inf"), -float("inf"), 0.0, None, 2.5] * 10, pa.float64())
    merged = merged.set_column(merged.schema.get_field_index("a1"), "a1", sums)
    outputs = [
        Output("j", "j", "COMPLEX<json>"),
        Output("d", "d", "DOUBLE"),
        Output("b", "d", "DOUBLE", sql_type_name="BOOLEAN"),
    ]
    plan = SqlPlan(outputs, query.to_json())
    for fmt in RESULT_FORMATS:
        encoding = _encoding(fmt, (True, True, True), True)
        assert _new(plan, query, merged, encoding) == _old(plan, query, merged, encoding)


ORDERS: dict[str, list[tuple[int, bool]]] = {
    "a count descending, then a string": [(5, True), (1, False)],
    "a BOOLEAN, then an instant descending": [(10, False), (8, True)],
    "the bucket in a zone": [(0, True)],
    "a double, then a column of nulls": [(6, False), (13, True)],
    "a string with ties, then a FLOAT": [(1, True), (7, False)],
    "a BOOLEAN read from doubles (the old way)": [(11, True), (5, False)],
    "an array (the old way)": [(2, False)],
}
CUTS = [(0, None), (5, 100), (0, 0), (650, 100), (ROWS + 1, None)]


@pytest.mark.parametrize("order", sorted(ORDERS))
@pytest.mark.parametrize(("offset", "limit"), CUTS)
def test_ordered_and_cut_in_the_broker(order: str, offset: int, limit: int | None) -> None:
    """ORDER BY / OFFSET / LIMIT applied to the answer's columns as `SqlPlan.rows` applies them
    (stable, nulls first, instants as their text), or the old way in the worker for arrays."""
    query = _query({"type": "period", "period": "PT1H", "timeZone": "Asia/Kolkata"})
    merged = _answer(query, seed=9)
    ties = pa.array([i % 3 if i % 7 else None for i in range(merged.num_rows)], pa.int64())  # counts: ties
    merged = merged.set_column(merged.schema.get_field_index("a0"), "a0", ties)
    plan = SqlPlan(list(OUTPUTS), query.to_json(), order=ORDERS[order], offset=offset, limit=limit,
                   time_zone="America/Los_Angeles")  # fmt: skip
    for fmt in ("array", "csv"):
        encoding = _encoding(fmt, (True, False, False), True)
        assert _new(plan, query, merged, encoding) == _old(plan, query, merged, encoding)


def test_plans_left_to_the_old_way() -> None:
    """Rows added in the broker, a subquery's rows, and groupBy shapes the writer does not print go
    the old way."""
    query = _query()
    native = query.to_json()
    encoding = _encoding("array", (False, False, False), True)
    assert sql_answer(SqlPlan(list(OUTPUTS), native), encoding) is not None
    changes: list[dict[str, Any]] = [
        {"empty_row": True}, {"row_bound": 10},
        {"raw_times": True}, {"native": {**native, "queryType": "timeseries"}}, {"native": None},
        {"outputs": [Output("a", "rows", "LONG"), Output("a", "d", "DOUBLE")]},
    ]  # fmt: skip
    for changed in changes:
        assert (
            sql_answer(SqlPlan(**{"outputs": list(OUTPUTS), "native": native, **changed}), encoding) is None
        )
    writer = SqlAnswer(tuple(OUTPUTS), None, "array")
    assert not writer.takes(_query(subtotalsSpec=[["s"], []]))
    assert not writer.takes(_query(context={"resultAsArray": True}))


@pytest.mark.parametrize("descending", [False, True])
def test_doubles_with_nan_and_infinities_order_as_java_compares_them(descending: bool) -> None:
    """Druid orders doubles by `Double.compare`: -Infinity first, NaN after +Infinity (nulls
    first); the answer spells the three as strings, which the broker once failed to compare."""
    query = _query(dimensions=["s"])
    values = [float("nan"), float("inf"), -float("inf"), 0.0, None, 2.5, -7.0, 1e300] * 3
    merged = _merged(query, 4, [pa.array([f"k{i}" for i in range(len(values))])], 3_600_000)
    assert merged.num_rows == len(values)
    merged = merged.set_column(merged.schema.get_field_index("a1"), "a1", pa.array(values, pa.float64()))
    plan = SqlPlan([Output("d", "d", "DOUBLE")], query.to_json(), order=[(0, descending)])
    got = orjson.loads(_old(plan, query, merged, _encoding("array", (False, False, False), True)))
    java = [None, "-Infinity", -7.0, 0.0, 2.5, 1e300, "Infinity", "NaN"]  # Double.compare's order
    expected = [[v] for v in java for _ in range(3)]
    assert got == (expected[::-1] if descending else expected)
    assert _new(plan, query, merged, _encoding("csv", (True, False, False), True)) == _old(
        plan, query, merged, _encoding("csv", (True, False, False), True)
    )
