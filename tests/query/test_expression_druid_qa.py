"""Druid expressions over the first row of Druid's QA dataset `test_array` (qatests/qaArray/sql),
against the answers of Druid's QA files (`tests/sql_corpus/druid_qa/qaArray/`): each case names
the file and the line of the statement whose expected table it restates."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from tests.query.test_expression_arrays import evaluate

SCALAR_ARRAYS = [
    [True, False, None], [1, 2, None], [0.1, 0.2, None], ["S1", "S2", None], [None, None, None], [],
    [True, 1, 0.1, "S1", None],
]  # fmt: skip
A_NESTED = [*SCALAR_ARRAYS, [*SCALAR_ARRAYS, SCALAR_ARRAYS]]  # as the dataset holds it
JSON_PATHS_OF_A_NESTED = [
    "$[2]",
    "$[7][6]",
    "$[7][7][3]",
    "$[3]",
    "$[7][7][2]",
    "$[4]",
    "$[7][7][5]",
    "$[5]",
    "$[7][7][4]",
    "$[6]",
    "$[7][7][6]",
    "$[7][0]",
    "$[7][1]",
    "$[7][2]",
    "$[7][3]",
    "$[0]",
    "$[7][4]",
    "$[7][7][1]",
    "$[1]",
    "$[7][5]",
    "$[7][7][0]",
]
ROW = {
    "a_int": ("BIGINT[]", [1, 2, None]),
    "a_empty": ("BIGINT[]", []),
    "a_nested": ("JSON", orjson.dumps(A_NESTED).decode()),
    "s_null": ("VARCHAR", None),
}


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        # ops_funcs_array_funcs.01.all.iq line 519: $[7] holds arrays, so no VARCHAR ARRAY is there
        ("json_value(a_nested, '$[7]', 'ARRAY<STRING>')", None),
        ("array_length(json_value(a_nested, '$[7]', 'ARRAY<STRING>'))", None),
        ("json_value(a_nested, '$[1]', 'ARRAY<LONG>')", [1, 2, None]),
        # ops_funcs_json_funcs.01.all.iq lines 74, 278, 380: an array's keys are its indexes
        ("json_keys(a_int, '$.')", ["0", "1", "2"]),
        ("json_keys(a_empty, '$.')", []),
        ("json_keys(a_nested, '$.')", [str(i) for i in range(8)]),
        # ops_funcs_json_funcs.02.all.iq line 366: a null value's one path is the root
        ("json_paths(s_null)", ["$"]),
        ("json_paths(json_value(a_nested, '$[7]', 'ARRAY<STRING>'))", ["$"]),
        # ops_funcs_json_funcs.02.all.iq line 349: an array of scalars is one literal, an array
        # holding arrays is walked; the paths come in the order of Druid's HashSet of them
        ("json_paths(a_nested)", JSON_PATHS_OF_A_NESTED),
        # sql_subquery_with_where.52.all.iq line 491, .54 line 833: a nested value equals itself
        ("a_nested == a_nested", 1),
        ("a_nested != a_nested", 0),
    ],
)
def test_expressions_answer_as_druids_qa_files(expression: str, expected: Any) -> None:
    assert evaluate(expression, ROW) == expected
