"""Array and nested values in the broker's DuckDB stage, against the answers of Druid's QA files
(quidem-ut `qaArray`, `qaUnnest`; `tests/sql_corpus/druid_qa/`): each test names the file and the
line of the statement whose expected table it restates, over that dataset's rows."""

from __future__ import annotations

from tests.sql_functions.kit import run

# qatests/qaArray/sql: a_bool and a_str of test_array's four rows (two of each order)
TEST_ARRAY = {
    "test_array": "SELECT * FROM (VALUES "
    "([1, 0, NULL]::BIGINT[], ['S1', 'S2', NULL]), ([1, 0, NULL]::BIGINT[], ['S1', 'S2', NULL]), "
    "([NULL, 0, 1]::BIGINT[], [NULL, 'S2', 'S1']), ([NULL, 0, 1]::BIGINT[], [NULL, 'S2', 'S1'])"
    ") t(a_bool, a_str)"
}


def _rows(sql: str) -> list[object]:
    return sorted((row[0] for row in run(sql, TEST_ARRAY)), key=repr)


def test_array_order_puts_a_null_element_first() -> None:
    # sql_subquery_with_where.08.all.iq line 745: only [1, 0, null] is above [1, 0]
    assert _rows("SELECT a_bool FROM test_array WHERE a_bool > ARRAY[1, 0]") == [[1, 0, None]] * 2
    # .09 line 9 / line 180: nothing is above [1, 0, null] nor [1, 2, 3]
    assert _rows("SELECT a_bool FROM test_array WHERE a_bool > ARRAY[1, 0, NULL]") == []
    assert _rows("SELECT a_bool FROM test_array WHERE a_bool > ARRAY[1, 2, 3]") == []
    # .39 line 567: both orders are at most [S1, S2, null]
    assert _rows("SELECT a_str FROM test_array WHERE a_str <= ARRAY['S1', 'S2', NULL]") == (
        [["S1", "S2", None]] * 2 + [[None, "S2", "S1"]] * 2
    )


# qatests/qaAggFuncs: tab0l0 of test_agg_funcs' 18 rows (six of each value, six null)
TEST_AGG_FUNCS = {
    "test_agg_funcs": "SELECT * FROM (VALUES "
    + ", ".join(["(1111111111)"] * 6 + ["(2222222222)"] * 6 + ["(NULL::BIGINT)"] * 6)
    + ") t(tab0l0)"
}


def test_array_to_string_of_one_null_element_is_null() -> None:
    # qaAggFuncs/array_agg_long_test002.all.iq line 544: the null group's [null] joins to null
    grouped = (
        "SELECT length(array_to_string(array_agg(DISTINCT tab0l0), '')) FROM test_agg_funcs GROUP BY tab0l0"
    )
    assert sorted((row[0] for row in run(grouped, TEST_AGG_FUNCS)), key=repr) == [10, 10, None]
    # array_agg_long_test001.all.iq line 50: beside other elements a null prints as 'null'
    whole = "SELECT strlen(array_to_string(array_agg(tab0l0), '|')) FROM test_agg_funcs"
    assert run(whole, TEST_AGG_FUNCS) == [(12 * 10 + 6 * len("null") + 17,)]


def test_array_to_string_of_a_string_is_that_string() -> None:
    # qaAggFuncs/array_agg_long_test004.all.iq line 262: ARRAY_TO_STRING over the string another
    # ARRAY_TO_STRING made reads it as the array of its one value
    joined = (
        "SELECT strlen(array_to_string(col, '|')) FROM"
        " (SELECT array_to_string(array_agg(tab0l0, 100000), '|') AS col FROM test_agg_funcs)"
    )
    assert run(joined, TEST_AGG_FUNCS) == [(12 * 10 + 6 * len("null") + 17,)]


def test_array_contains_reads_a_string_as_the_array_of_its_one_value() -> None:
    # qaUnnest/mv_sql_array_funcs.std.iq case 13: ARRAY_CONTAINS(c, '1') over unnested multi-value
    # strings is false, not null, for a null c; qaUnnest/array_sql_mv_funcs.01.std.iq line 721: a
    # null contains null
    table = {"t": "SELECT * FROM (VALUES (['1', NULL, '', '2'])) t(a)"}
    assert run("SELECT c, ARRAY_CONTAINS(c, '1'), ARRAY_CONTAINS(c, c) FROM t, UNNEST(a) AS u(c)", table) == [
        ("1", True, True),
        (None, False, True),
        ("", False, True),
        ("2", False, True),
    ]


def test_booleans_unnested_from_a_boolean_array_are_booleans() -> None:
    # qaUnnest/array_sql_group_by.01.std.iq line 607 and array_sql_order_by.01.std.iq line 449: the
    # elements of JSON_VALUE(.. RETURNING BOOLEAN ARRAY) unnest as BOOLEANs (printed false, true),
    # though the array itself holds Druid's 1 and 0
    nested = {"t": "SELECT * FROM (VALUES ('[[true, false, null]]'::JSON)) v(a_nested)"}
    unnest = "FROM t, UNNEST(JSON_VALUE(a_nested, '$[0]' RETURNING BOOLEAN ARRAY)) AS u(c)"
    assert run(f"SELECT c, count(*) cnt {unnest} GROUP BY c HAVING c IS FALSE", nested) == [(False, 1)]
    assert sorted(run(f"SELECT c {unnest}", nested), key=repr) == [(False,), (None,), (True,)]
    assert run("SELECT JSON_VALUE(a_nested, '$[0]' RETURNING BOOLEAN ARRAY) FROM t", nested) == [
        ([1, 0, None],)
    ]
