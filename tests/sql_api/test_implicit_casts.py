"""Druid's implicit casts of strings in numeric operations, written out before planning
(`strata.sql.implicit_casts`); the types are Druid's as its QA files show them (qaUnnest
`mv_sql_ops`: `c + c` over unnested multi-value strings is `2.0`, `c + c_long` is `2`;
`mv_sql_agg_funcs`: `SUM(c)` is `18.0`)."""

from __future__ import annotations

import sqlglot

from strata.sql.dialect import DIALECT
from strata.sql.implicit_casts import implicit_casts

COLUMNS = {"t": {"s": "STRING", "n": "LONG", "d": "DOUBLE", "mv": "STRING"}}
UNNEST = "FROM t, UNNEST(MV_TO_ARRAY(mv)) AS u(c)"


def cast(sql: str) -> str:
    tree = sqlglot.parse_one(sql, dialect=DIALECT)
    return implicit_casts(tree, COLUMNS.get).sql(dialect=DIALECT)


def test_a_string_in_arithmetic_takes_the_other_operands_type_and_two_strings_are_doubles() -> None:
    assert cast(f"SELECT c + c {UNNEST}") == f"SELECT CAST(c AS DOUBLE) + CAST(c AS DOUBLE) {UNNEST}"
    assert cast(f"SELECT c + n {UNNEST}") == f"SELECT CAST(c AS BIGINT) + n {UNNEST}"
    assert cast("SELECT d * s FROM t") == "SELECT d * CAST(s AS DOUBLE) FROM t"
    assert cast("SELECT n - '2' FROM t") == "SELECT n - CAST('2' AS BIGINT) FROM t"


def test_a_string_argument_of_a_function_taking_numbers_is_a_double() -> None:
    assert (
        cast(f"SELECT SIN(c), SUM(c) {UNNEST}")
        == f"SELECT SIN(CAST(c AS DOUBLE)), SUM(CAST(c AS DOUBLE)) {UNNEST}"
    )


def test_numbers_unknown_types_and_other_functions_are_left_alone() -> None:
    for sql in (
        "SELECT n + d, SIN(n), SUM(d) FROM t",
        "SELECT x + s FROM elsewhere",  # a table whose columns are unknown
        "SELECT s || s, UPPER(s), __time + INTERVAL '1' DAY FROM t",
        "SELECT NULL + s FROM t",
    ):
        assert cast(sql) == sqlglot.parse_one(sql, dialect=DIALECT).sql(dialect=DIALECT)


def test_a_formatted_number_in_arithmetic_is_a_double() -> None:
    # qaUnnest/mv_sql_scalar_numeric_funcs.03.all.iq 32 and 34: HUMAN_READABLE_DECIMAL_FORMAT(c) + ...
    # of '1' is 2.0 beside itself, 2 beside a LONG (the formatted string is cast back)
    formatted = "HUMAN_READABLE_DECIMAL_FORMAT(CAST(c AS INT))"
    assert (
        cast(f"SELECT {formatted} + {formatted} {UNNEST}")
        == f"SELECT CAST({formatted} AS DOUBLE) + CAST({formatted} AS DOUBLE) {UNNEST}"
    )
    assert cast(f"SELECT {formatted} + n {UNNEST}") == f"SELECT CAST({formatted} AS BIGINT) + n {UNNEST}"
    # line 891: beside CEIL of a LONG, a LONG too (Calcite types CEIL / FLOOR as their operand);
    # DuckDB refused VARCHAR + BIGINT
    assert (
        cast(f"SELECT {formatted} + CEIL(n) {UNNEST}")
        == f"SELECT CAST({formatted} AS BIGINT) + CEIL(n) {UNNEST}"
    )
    assert (
        cast(f"SELECT {formatted} + FLOOR(d) {UNNEST}")
        == f"SELECT CAST({formatted} AS DOUBLE) + FLOOR(d) {UNNEST}"
    )


def test_a_formatted_number_ordered_against_a_number_is_a_double() -> None:
    # qaUnnest/array_sql_scalar_numeric_funcs.03.all.iq 33: HUMAN_READABLE_DECIMAL_FORMAT(c + c) < 99999
    # keeps the rows whose formatted value is a number below it (DuckDB refused VARCHAR < INTEGER)
    formatted = "HUMAN_READABLE_DECIMAL_FORMAT(n + n)"
    assert cast(f"SELECT n FROM t WHERE {formatted} < 99999") == (
        f"SELECT n FROM t WHERE CAST({formatted} AS DOUBLE) < 99999"
    )
    # a column ordered against a number keeps its native range filter
    assert cast("SELECT n FROM t WHERE s < 5") == "SELECT n FROM t WHERE s < 5"
