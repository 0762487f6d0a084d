"""The operand type checks of Druid's validator (`strata.sql.operand_checks`), statement by statement.

Expected refusals and their messages are Druid's, from its QA files (quidem-ut `qaArray`,
`qaUnnest`: `tests/sql_corpus/druid_qa/`); the statements that must pass are ones those files show
Druid answering. The tables are the QA datasets' `test_array` and `test_unnest` with the types
Druid's schema discovery gives their columns.
"""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from strata.query.errors import TypeMismatch
from strata.sql.operand_checks import check_operand_types
from strata.sql.planner import parse

TABLES: dict[str, dict[str, str]] = {
    "test_array": {
        "__time": "LONG",
        "a_bool": "ARRAY<LONG>",
        "a_int": "ARRAY<LONG>",
        "a_float": "ARRAY<DOUBLE>",
        "a_str": "ARRAY<STRING>",
        "a_nested": "COMPLEX<json>",
        "t_int_scalar1": "LONG",
        "t_str_scalar1": "STRING",
    },
    "test_unnest": {
        "__time": "LONG",
        "c_str": "STRING",
        "c_long": "LONG",
        "c_mv_num": "MULTI_VALUE_STRING",
        "s_int": "LONG",
        "a_int": "ARRAY<LONG>",
    },
}


def columns(table: str) -> Mapping[str, str] | None:
    return TABLES.get(table)


def refusal(sql: str) -> str | None:
    try:
        check_operand_types(parse(sql)[0], columns)
    except TypeMismatch as e:
        assert e.status == 400
        return str(e)
    return None


@pytest.mark.parametrize(
    ("sql", "druid_says"),
    [
        ("SELECT exp(a_bool) AS col FROM test_array", "Cannot apply 'EXP' to arguments of type 'EXP("),
        (
            "SELECT exp(json_value(a_nested, '$[1]' RETURNING bigint array)) FROM test_array",
            "Cannot apply 'EXP' to arguments of type 'EXP(",
        ),
        ("SELECT upper(a_str) FROM test_array", "Cannot apply 'UPPER' to arguments of type 'UPPER("),
        (
            "SELECT * FROM test_array WHERE a_int = a_nested",
            "Cannot apply '=' to arguments of type '<BIGINT ARRAY> = <COMPLEX<JSON>>'",
        ),
        (
            "SELECT a_str + a_str FROM test_array",
            "Cannot apply '+' to arguments of type '<VARCHAR ARRAY> + <VARCHAR ARRAY>'",
        ),
        (
            "SELECT * FROM test_array WHERE a_nested NOT LIKE '%'",
            "Cannot apply 'NOT LIKE' to arguments of type 'NOT LIKE(<COMPLEX<JSON>>, <CHAR(1)>)'",
        ),
        (
            "SELECT * FROM test_array WHERE a_nested > a_nested",
            "Cannot apply '>' to arguments of type '<COMPLEX<JSON>> > <COMPLEX<JSON>>'",
        ),
        (
            "SELECT array_overlap(t_int_scalar1, a_int) FROM test_array",
            "Cannot apply 'ARRAY_OVERLAP' to arguments of type 'ARRAY_OVERLAP(<BIGINT>, <BIGINT ARRAY>)'",
        ),
        (
            "SELECT array_contains(t_int_scalar1, ARRAY[1, 2]) FROM test_array",
            "Cannot apply 'ARRAY_CONTAINS' to arguments of type 'ARRAY_CONTAINS(<BIGINT>, <INTEGER ARRAY>)'",
        ),
        (
            "SELECT array_concat_agg(t_int_scalar1) FROM test_array",
            "Cannot apply 'ARRAY_CONCAT_AGG' to arguments of type 'ARRAY_CONCAT_AGG(<BIGINT>)'",
        ),
        ("SELECT sum(a_float) FROM test_array", "Cannot apply 'SUM' to arguments of type 'SUM("),
        ("SELECT mv_length(a_nested) FROM test_array", "Cannot apply 'MV_LENGTH' to arguments of type"),
        ("SELECT cast(a_bool AS varchar) FROM test_array", "cannot convert"),
        # through UNNEST, a subquery and WITH: the unnested BIGINT is no timestamp
        (
            "SELECT time_floor(c, 'P1D') FROM test_unnest, unnest(a_int) AS u(c)",
            "Cannot apply 'TIME_FLOOR' to arguments of type 'TIME_FLOOR(",
        ),
        (
            "SELECT ln(x) FROM (SELECT a_int AS x FROM test_unnest)",
            "Cannot apply 'LN' to arguments of type 'LN(<BIGINT ARRAY>)'",
        ),
        (
            "WITH t AS (SELECT * FROM test_array) SELECT length(a_str) FROM t",
            "Cannot apply 'LENGTH' to arguments of type 'LENGTH(<VARCHAR ARRAY>)'",
        ),
        ("SELECT * FROM test_array WHERE a_bool IN (SELECT a_bool FROM test_array)", "ARRAY"),
        ("SELECT t1.a_int FROM test_array t1 FULL JOIN test_array t2 ON t1.a_int = t2.a_int", "not support"),
        ("SELECT t1.a_str FROM test_array t1, test_array t2 WHERE t1.a_str = t2.a_str", "not support"),
        (
            "SELECT t1.a_nested FROM test_array t1 JOIN test_array t2 ON t1.a_nested = t2.a_nested",
            "Cannot join",
        ),
        ("SELECT min(a_bool) FROM test_array", "does not support"),
        (
            "SELECT a_nested, count(*) FROM test_array GROUP BY a_nested HAVING a_nested = ARRAY[NULL, NULL]",
            "Cannot apply '=' to arguments of type",
        ),
        *(  # qaUnnest mv_sql_mv_funcs.std: Druid's MV_ operators type their multi-value operand STRING
            (
                f"SELECT {call} FROM test_unnest, unnest(mv_to_array(c_mv_num)) AS u(c)",
                f"Cannot apply '{name}'",
            )
            for call, name in [
                ("mv_offset(c_long, 0)", "MV_OFFSET"),
                ("mv_contains(c_long, '1')", "MV_CONTAINS"),
                ("mv_overlap(c_long, c)", "MV_OVERLAP"),
                ("mv_prepend(c_long, 'Z')", "MV_PREPEND"),
                ("mv_append('Z', c_long)", "MV_APPEND"),
                ("mv_concat(c, c_long)", "MV_CONCAT"),
                ("mv_to_string(c_long, '|')", "MV_TO_STRING"),
            ]
        ),
        (  # qaUnnest array_sql_scalar_datetime_funcs.std: TIME_PARSE parses strings, not numbers
            "SELECT time_parse(s_int) AS col FROM test_unnest",
            "Cannot apply 'TIME_PARSE' to arguments of type 'TIME_PARSE(",
        ),
        (
            "SELECT time_parse(c) FROM test_unnest, unnest(json_value(a_nested, '$[1]' RETURNING bigint array)) AS u(c)",
            "Cannot apply 'TIME_PARSE' to arguments of type 'TIME_PARSE(",
        ),
        (  # qaArray ops_funcs_scalar_funcs.41 and .42: a = b inside CASE a WHEN b and NULLIF(a, b)
            "SELECT (CASE a_nested WHEN ARRAY['FILLER'] THEN 1 ELSE 2 END) AS col FROM test_array",
            "Cannot apply '=' to arguments of type",
        ),
        (
            "SELECT nullif(a_nested, ARRAY['FILLER']) AS col FROM test_array",
            "Cannot apply '=' to arguments of type",
        ),
        (  # qaArray ops_funcs_scalar_funcs.42: "Illegal"
            "SELECT coalesce(json_value(a_nested, '$[0]' RETURNING boolean array), ARRAY[1, 0, NULL]) FROM test_array",
            "Illegal mixing of types in CASE or COALESCE statement",
        ),
        (
            "SELECT nvl(json_value(a_nested, '$[7][0]' RETURNING boolean array), ARRAY[1, 0, NULL]) FROM test_array",
            "Illegal mixing of types in CASE or COALESCE statement",
        ),
    ],
)
def test_druid_refuses(sql: str, druid_says: str) -> None:
    message = refusal(sql)
    assert message is not None, sql
    assert druid_says.lower() in message.lower()


@pytest.mark.parametrize(
    "sql",
    [
        # strings and numbers convert implicitly
        "SELECT mod(c, c_long + 1) FROM test_unnest, unnest(mv_to_array(c_mv_num)) AS u(c)",
        "SELECT abs(c_str), upper(c_long) FROM test_unnest",
        # multi-value functions take scalars and strings; ARRAY_LENGTH takes a scalar
        "SELECT mv_overlap(c, c_long), mv_length(c_long) FROM test_unnest, unnest(mv_to_array(c_mv_num)) AS u(c)",
        "SELECT array_length(s_int), array_to_mv(s_int) FROM test_unnest",
        "SELECT array_length(c_mv_num), array_contains(c_mv_num, '1') FROM test_unnest",
        "SELECT mv_filter_only(c, array['1', '2']) FROM test_unnest, unnest(mv_to_array(c_mv_num)) AS u(c)",
        # arrays compared with arrays, IN over a list of arrays, a time function over __time
        "SELECT * FROM test_array WHERE a_bool IN (json_value(a_nested, '$[0]' RETURNING boolean array))",
        "SELECT * FROM test_array WHERE a_int = ARRAY[1, 2] AND a_str <> a_str",
        "SELECT time_floor(__time, 'P1D'), floor(__time TO DAY), floor(t_int_scalar1) FROM test_array",
        "SELECT greatest(c, c_long, 1) FROM test_unnest, unnest(mv_to_array(c_mv_num)) AS u(c)",
        "SELECT t1.a_int FROM test_array t1 JOIN test_array t2 ON t1.t_int_scalar1 = t2.t_int_scalar1",
        "SELECT min(t_int_scalar1), max(t_str_scalar1) FROM test_array",
        "SELECT nullif(a_str, ARRAY['FILLER']), (CASE a_int WHEN ARRAY[1] THEN 1 END) FROM test_array",
        # the same file: MV_LENGTH and MV_OVERLAP's second operand take a number, STRING_TO_MV too
        "SELECT mv_offset(c, 0), mv_prepend(c, 'Z'), mv_append('Z', c), mv_concat(c, c), string_to_mv(c_long, '|') "
        "FROM test_unnest, unnest(mv_to_array(c_mv_num)) AS u(c)",
        # qaUnnest mv_sql_scalar_datetime_funcs.std: a string, or a number cast to one
        "SELECT time_parse(c), time_parse(cast(c_long AS char)) FROM test_unnest, unnest(mv_to_array(c_mv_num)) AS u(c)",
        # the same file: a BOOLEAN column is a BIGINT one; arrays of one element type
        "SELECT coalesce(a_bool, ARRAY[1, 0, NULL]), nvl(a_int, ARRAY[1, 2, NULL]) FROM test_array",
        "SELECT coalesce(json_value(a_nested, '$[1]' RETURNING bigint array), ARRAY[1, 2, NULL]) FROM test_array",
        # what the checks cannot type is let through
        "SELECT exp(x) FROM unknown_table",
        "SELECT exp(c) FROM test_array, unnest(no_such_column) AS u(c)",
    ],
)
def test_druid_answers(sql: str) -> None:
    assert refusal(sql) is None
