"""Druid expressions over arrays, multi-value strings and JSON, evaluated by DuckDB over one row,
against the values Druid's expression reference (`math-expr.md`) and JSON function reference
(`sql-json-functions.md`) document."""

from __future__ import annotations

from typing import Any

import duckdb
import orjson
import pytest

from strata.query.duck import MULTI_VALUE
from strata.query.errors import QueryError
from strata.query.expressions.duck import compile_expression
from strata.query.expressions.parser import ArrayLiteral, Call, Identifier, Lambda, Literal, parse_expression
from strata.query.sql_functions import install

ROW = {
    "tags": (MULTI_VALUE, ["a", "b"]),
    "none": (MULTI_VALUE, None),
    "nums": ("BIGINT[]", [1, 2, 3]),
    "strs": ("VARCHAR[]", ["x", None, "y"]),
    "empty": ("BIGINT[]", []),
    "one_null": ("VARCHAR[]", [None]),
    "no_array": ("BIGINT[]", None),
    "no_text": ("VARCHAR", None),
    "doc": ("JSON", '{"a": {"b": 7, "c": [1, 2], "d": true}, "s": "hi", "n": null, "o": [{"k": 1}]}'),
    "text": ("VARCHAR", '{"x": 1}'),
    "n": ("BIGINT", 2),
}


def evaluate(expression: str, row: dict[str, tuple[str, Any]] = ROW) -> Any:
    """`expression` over one row (column -> (DuckDB type, value))."""
    types = {name: t for name, (t, _) in row.items()}
    typed = compile_expression(parse_expression(expression), types)
    conn = duckdb.connect()
    install(conn)
    columns = ", ".join(
        f'CAST(? AS {t}) AS "{name}"' if t != "JSON" else f'json(?) AS "{name}"'
        for name, (t, _) in row.items()
    )
    values = [v for _, v in row.values()]
    value = conn.execute(f"SELECT {typed.sql} FROM (SELECT {columns})", values).fetchone()
    assert value is not None
    result = value[0]
    if typed.kind == "COMPLEX<json>" and isinstance(result, str):
        return orjson.loads(result)
    return result


def test_parser_reads_arrays_and_lambdas() -> None:
    assert parse_expression("[1, 2, null]") == ArrayLiteral((Literal(1), Literal(2), Literal(None)))
    assert parse_expression("<STRING>[]") == ArrayLiteral((), "STRING")
    assert parse_expression("map((x) -> x + 1, nums)") == Call(
        "map", (Lambda(("x",), parse_expression("x + 1")), Identifier("nums"))
    )
    assert parse_expression("(a + b)") == parse_expression("a + b")  # a parenthesis is no lambda
    with pytest.raises(QueryError, match="literals only"):
        parse_expression("[n, 1]")


@pytest.mark.parametrize(
    "expression,expected",
    [
        ("array_length(nums)", 3),
        ("array_offset(nums, 1)", 2),
        ("array_offset(nums, 3)", None),  # out of range
        ("array_ordinal(nums, 1)", 1),
        ("array_contains(nums, 2)", 1),
        ("array_contains(nums, [1, 3])", 1),
        ("array_contains(nums, [1, 4])", 0),
        ("array_overlap(nums, [9, 3])", 1),
        ("scalar_in_array(3, nums)", 1),
        ("scalar_in_array(null, nums)", None),
        ("array_offset_of(nums, 3)", 2),
        ("array_ordinal_of(nums, 9)", None),
        ("array_prepend(0, nums)", [0, 1, 2, 3]),
        ("array_append(nums, 4)", [1, 2, 3, 4]),
        ("array_concat(nums, [4])", [1, 2, 3, 4]),
        ("array_slice(nums, 1, 3)", [2, 3]),
        ("array_slice(nums, 4, 5)", None),  # start past the end
        # qaArray/ops_funcs_array_funcs.03.all.iq line 5: a null array contains nothing (null)
        ("array_contains(no_array, 1)", None),
        # qaUnnest/array_sql_mv_funcs.01.std.iq lines 721 and 751: a null scalar is [null]
        ("array_contains(no_text, no_text)", 1),
        ("array_contains(no_text, 'a')", 0),
        ("array_contains(tags, 'a')", 1),
        ("array_to_string(strs, '-')", "x-null-y"),
        ("array_to_string(one_null, '-')", None),  # Druid: one null element joins to null
        ("array_to_string(empty, '-')", ""),
        ("string_to_array('a,b', ',')", ["a", "b"]),
        ("array(1, 2.5)", [1.0, 2.5]),
        ("map((x) -> x * 2, nums)", [2, 4, 6]),
        ("filter((x) -> x > 1, nums)", [2, 3]),
        ("filter((x) -> x > 9, nums)", []),  # nothing left is the empty array (FilterFunction)
        ("fold((x, acc) -> x + acc, nums, 0)", 6),
        ("fold((x, acc) -> concat(acc, x), strs, '')", None),  # concat of a null is null
        ("any((x) -> x > 2, nums)", 1),
        ("all((x) -> x > 2, nums)", 0),
        ("any((x) -> x > 2, empty)", 0),
        ("all((x) -> x > 2, empty)", 1),
        ("cartesian_map((x, y) -> concat(x, y), ['a', 'b'], ['1', '2'])", ["a1", "a2", "b1", "b2"]),
        ("map((n) -> n + 1, nums)", [2, 3, 4]),  # a lambda parameter shadows the column
        ("nums == [1, 2, 3]", 1),
        ("cast(n, 'ARRAY<STRING>')", ["2"]),
    ],
)
def test_array_functions(expression: str, expected: Any) -> None:
    assert evaluate(expression) == expected


@pytest.mark.parametrize(
    "expression,expected",
    [
        ("concat(tags, '-x')", ["a-x", "b-x"]),  # applied to each value
        ("concat(none, '-x')", [None]),  # a row with no value is one null value
        ("concat(tags, tags)", ["aa", "bb"]),  # one column is mapped once
        ("array_length(tags)", 2),  # read as an array where an array is expected
        ("map((t) -> upper(t), tags)", ["A", "B"]),
        ("array_to_string(tags, ',')", "a,b"),
    ],
)
def test_multi_value_columns_map_where_scalars_are_expected(expression: str, expected: Any) -> None:
    assert evaluate(expression) == expected


def test_two_multi_value_columns_map_over_every_pair() -> None:
    ROW["more"] = (MULTI_VALUE, ["1", "2"])
    try:
        assert evaluate("concat(tags, more)") == ["a1", "a2", "b1", "b2"]
    finally:
        del ROW["more"]


@pytest.mark.parametrize(
    "expression,expected",
    [
        ("json_value(doc, '$.a.b')", "7"),
        ("json_value(doc, '$.a.b', 'LONG')", 7),
        ("json_value(doc, '$.a.b', 'DOUBLE')", 7.0),
        ("json_value(doc, '$.a')", None),  # an object is no literal
        ("json_value(doc, '$.a.c')", None),  # neither is an array
        ("json_value(doc, '$.a.c', 'ARRAY<LONG>')", [1, 2]),
        ("json_value(doc, '$.a.c[1]', 'LONG')", 2),
        ("json_value(doc, '$.n')", None),
        ("json_value(doc, '$.missing')", None),
        ("json_value(doc, '$.a.d', 'LONG')", 1),  # a boolean as a number
        ("json_value(doc, '$[\\'s\\']')", "hi"),
        ("json_query(doc, '$.a.c')", [1, 2]),
        ("json_query(doc, '$.o[0]')", {"k": 1}),
        ("json_keys(doc, '$.a')", ["b", "c", "d"]),
        ("json_keys(doc, '$.s')", None),
        ("json_paths(json_query(doc, '$.a'))", ["$.b", "$.c", "$.d"]),
        ("to_json_string(json_query(doc, '$.o'))", '[{"k":1}]'),
        ("json_value(parse_json(text), '$.x', 'LONG')", 1),
        ("try_parse_json('{oops')", None),
        ("json_object('k', n, 'v', 'w')", {"k": 2, "v": "w"}),
        ("json_value(json_merge(text, '{\"x\": 5}'), '$.x', 'LONG')", 5),
    ],
)
def test_json_functions(expression: str, expected: Any) -> None:
    assert evaluate(expression) == expected


def test_json_query_array_wraps_a_single_value() -> None:
    assert [orjson.loads(v) for v in evaluate("json_query_array(doc, '$.o')")] == [{"k": 1}]
    assert [orjson.loads(v) for v in evaluate("json_query_array(doc, '$.s')")] == ["hi"]


# test_array's first row (qatests/qaArray/ops_funcs), each column typed as Druid's `auto` types it
TEST_ARRAY_ROW = {
    "a_int": ("BIGINT[]", [1, 2, None]),
    "a_float": ("DOUBLE[]", [0.1, 0.2, None]),
    "a_str": ("VARCHAR[]", ["S1", "S2", None]),
    "a_empty": ("BIGINT[]", []),
    "a_mixed": ("VARCHAR[]", ["true", "1", "0.1", "S1", None]),
    "a_missing": ("VARCHAR[]", None),  # what json_value(a_nested, '$[7]' RETURNING varchar array) reads
    "mv_none": (MULTI_VALUE, None),
    # qatests/qaUnnest/mv: c unnested from c_mv_num_with_null_and_empty_val, c_long
    "c_blank": ("VARCHAR", ""),
    "c_null": ("VARCHAR", None),
    "c_one": ("VARCHAR", "1"),
    "c_long": ("BIGINT", 1),
}


@pytest.mark.parametrize(
    "expression,expected",
    [
        # mv_overlap (SQL's MV_OVERLAP), ops_funcs_mv_funcs: no match is unknown when a value is null
        ("mv_overlap(a_float, [1])", None),  # .04.all line 26
        ("mv_overlap(a_str, [1])", None),  # .04.all line 77
        ("mv_overlap(a_empty, [1])", None),  # .04.all line 179: no values is the one value null
        ("mv_overlap(a_mixed, [1])", 1),  # .04.all line 230: the strings cast to the right's LONG
        ("mv_overlap(a_int, [1])", 1),  # .03.std line 807
        ("array_overlap(a_float, [1])", 0),  # ops_funcs_array_funcs.03.all line 204: unlike mv_
        # qaUnnest/mv_sql_mv_funcs.std line 441, mv_overlap(c, c_long): '' false, null unknown
        ("mv_overlap(c_blank, c_long)", 0),
        ("mv_overlap(c_null, c_long)", None),
        ("mv_overlap(c_one, c_long)", 1),
        ("mv_overlap(c_null, c_null)", 1),  # line 406, mv_overlap(c, c): a null asks for a null
        # array_offset_of / array_ordinal_of compare without casting
        ("array_offset_of(a_int, 1)", 0),  # ops_funcs_mv_funcs.04.all line 374
        ("array_offset_of(a_mixed, 1)", None),  # .04.all line 629, ops_funcs_array_funcs.03.all 807
        ("array_ordinal_of(a_mixed, 1)", None),  # .05.all line 196
        # array_slice pads past the end with nulls
        ("array_slice(a_empty, 0, 2)", [None, None]),  # .07.all line 77, array_funcs.06.all 128
        ("array_slice(a_str, 0, 2)", ["S1", "S2"]),  # .06.std line 807
        # mv_to_array of an array: the array as strings, empty and null as they are
        ("mv_to_array(a_empty)", []),  # .08.all line 360
        ("mv_to_array(a_missing)", None),  # .08.all line 470
        ("mv_to_array(mv_none)", [None]),  # a multi-value row with no value is one null
    ],
)
def test_druid_qa_array_answers(expression: str, expected: Any) -> None:
    assert evaluate(expression, TEST_ARRAY_ROW) == expected
