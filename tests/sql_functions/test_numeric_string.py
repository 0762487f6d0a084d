"""Scalar numeric, string, IP and conditional functions through `to_duckdb`, against the results
Druid's documentation publishes (docs/querying/sql-functions.md of apache/druid: the examples over
`flight-carriers`, `taxi-trips` and constants)."""

from __future__ import annotations

import math

import pytest

from tests.sql_functions.kit import TAXI, one, run

# the `flight-carriers` rows the examples show (first rows, in the examples' order)
FLIGHTS = {
    "flight-carriers": "SELECT * FROM (VALUES "
    "('San Juan, PR', 'Washington, DC', 'Puerto Rico', 'PR', 'SJU', -27, 1571.0, 314, 'N951DL'),"
    "('Boston, MA', 'Chicago, IL', 'Massachusetts', 'MA', 'BOS', 5, 867.0, 315, NULL),"
    "('Miami, FL', 'Boston, MA', 'Florida', 'FL', 'MIA', 3, 1258.0, 316, 'N1')"
    ") t(OriginCityName, DestCityName, OriginStateName, OriginState, Origin, ArrDelay, Distance,"
    " Flight_Number_Reporting_Airline, Tail_Number)"
}

CONSTANTS = [
    ("ACOS(0)", 1.5707963267948966),
    ("ASIN(1)", 1.5707963267948966),
    ("ATAN(1)", 0.7853981633974483),
    ("ATAN2(1,-1)", 2.356194490192345),
    ("COS(PI / 3)", 0.5000000000000001),
    ("COT(PI / 3)", 0.577350269189626),
    ("SIN(PI / 3)", 0.8660254037844386),
    ("TAN(PI / 3)", 1.7320508075688767),
    ("DEGREES(PI)", 180),
    ("RADIANS(180)", 3.141592653589793),
    ("EXP(1)", 2.7182818284590455),
    ("SQRT(25)", 5),
    ("POWER(5, 2)", 25),
    ("MOD(78, 10)", 8),
    ("DIV(78, 10)", 7),
    ("SAFE_DIVIDE(78, 10)", 7),
    ("GREATEST(PI, 4, -5.0)", 4),
    ("BITWISE_AND(12, 10)", 8),
    ("BITWISE_COMPLEMENT(12)", -13),
    ("BITWISE_CONVERT_DOUBLE_TO_LONG_BITS(255)", 4643176031446892544),
    ("BITWISE_CONVERT_LONG_BITS_TO_DOUBLE(4643176031446892544)", 255),
    ("BITWISE_OR(12, 10)", 14),
    ("BITWISE_SHIFT_LEFT(2, 3)", 16),
    ("BITWISE_SHIFT_RIGHT(16, 3)", 2),
    ("BITWISE_XOR(12, 10)", 6),
]


@pytest.mark.parametrize(("call", "expected"), CONSTANTS, ids=[c for c, _ in CONSTANTS])
def test_numeric_constants(call: str, expected: float) -> None:  # sql-functions.md examples
    assert math.isclose(one(f"SELECT {call}"), expected, rel_tol=1e-12)


def test_integer_results_stay_integers() -> None:
    assert run("SELECT MOD(78, 10), DIV(78, 10), SAFE_DIVIDE(78, 10), 7 / 2, -7 / 2, 7.0 / 2") == [
        (8, 7, 7, 3, -3, 3.5)
    ]
    assert one("SELECT SAFE_DIVIDE(1, 0)") is None


def test_numeric_columns() -> None:  # sql-functions.md: ABS, CEIL, FLOOR, LN, LOG10, ROUND, TRUNCATE
    sql = 'SELECT ABS("ArrDelay") FROM "flight-carriers" WHERE "ArrDelay" < 0 LIMIT 1'
    assert one(sql, FLIGHTS) == 27
    sql = (
        'SELECT CEIL("fare_amount"), FLOOR("fare_amount"), LN("max_temperature"), LOG10("max_temperature"),'
        ' ROUND("pickup_longitude", 0), TRUNCATE("pickup_longitude", 1) FROM "taxi-trips" LIMIT 1'
    )
    ceil, floor, ln, log10, rounded, truncated = run(sql, TAXI)[0]
    assert (ceil, floor, rounded, truncated) == (22, 21, -74, -73.9)
    assert math.isclose(ln, 4.330733340286331) and math.isclose(log10, 1.8808135922807914)


def test_human_readable_formats() -> None:  # sql-functions.md, HUMAN_READABLE_*
    sql = (
        "SELECT HUMAN_READABLE_BINARY_BYTE_FORMAT(1000000, 2), HUMAN_READABLE_DECIMAL_BYTE_FORMAT(1000000, 2),"
        " HUMAN_READABLE_DECIMAL_FORMAT(1000000, 2)"
    )
    assert run(sql) == [("976.56 KiB", "1.00 MB", "1.00 M")]


STRINGS = [
    ("BTRIM('___abc___', '_')", "abc"),
    ("LTRIM('___abc___', '_')", "abc___"),
    ("RTRIM('___abc___', '_')", "___abc"),
    ("TRIM( BOTH '_' FROM '___abc___')", "abc"),
    ("LEFT('ABCDEFG', 3)", "ABC"),
    ("RIGHT('ABCDEFG', 3)", "EFG"),
    ("REPEAT('abc', 3)", "abcabcabc"),
    ("REPLACE('abc 123 abc 123', 'abc', 'XYZ')", "XYZ 123 XYZ 123"),
    ("REVERSE('abc')", "cba"),
    ("SUBSTRING('abcdefghi', 4, 3)", "def"),
    ("STRPOS('Hello World!', 'World')", 7),
    ("PARSE_LONG('1110', 2)", 14),
    ("REGEXP_REPLACE('foo bar baz', '([A-Za-z]+) ([A-Za-z]+) ([A-Za-z]+)' , '$2!')", "bar!"),
    ("DECODE_BASE64_UTF8('SGVsbG8gV29ybGQhCg==')", "Hello World!\n"),  # the page drops the \n
    ("LEAST( 'apple', 'orange', 'pear')", "apple"),
    ("IPV4_PARSE('5.5.5.5')", 84215045),
    ("IPV4_STRINGIFY(84215045)", "5.5.5.5"),
    ("IPV6_MATCH('75e9:efa4:29c6:85f6::232c', '75e9:efa4:29c6:85f6::/64')", True),
    ("COALESCE(null, null, 5)", 5),
]


@pytest.mark.parametrize(("call", "expected"), STRINGS, ids=[c for c, _ in STRINGS])
def test_string_constants(call: str, expected: object) -> None:  # sql-functions.md examples
    assert one(f"SELECT {call}") == expected


def test_parse_functions_answer_null_for_what_they_cannot_parse() -> None:
    # qaUnnest/mv_sql_scalar_string_funcs.01.std.iq 20 and qaAggFuncs string_agg_*_test00N.01 18:
    # PARSE_LONG of '' or of '1|2' is null, as IPV4_PARSE of what is no address (DuckDB refused a
    # null from these functions: "InvalidInputException")
    values = {"u": "SELECT * FROM (VALUES (NULL), (''), ('1'), ('1|2'), ('5.5.5.5')) t(c)"}
    assert run("SELECT PARSE_LONG(c), IPV4_PARSE(c) FROM u", values) == [
        (None, None),
        (None, None),
        (1, None),
        (None, None),
        (None, 84215045),
    ]
    assert run("SELECT PARSE_LONG(STRING_AGG(c, '|'), 16) FROM u", values) == [(None,)]


def test_string_columns() -> None:  # sql-functions.md: CONCAT ... UPPER over flight-carriers
    sql = (
        'SELECT CONCAT("OriginCityName", \' to \', "DestCityName"), CONTAINS_STRING("OriginCityName", \'San\'),'
        ' ICONTAINS_STRING("OriginCityName", \'san\'), LENGTH("OriginCityName"), LOWER("OriginCityName"),'
        ' UPPER("OriginCityName"), LPAD("OriginStateName", 11, \'+\'), RPAD("OriginStateName", 11, \'+\'),'
        " POSITION('PR' IN \"OriginCityName\" FROM 5), REGEXP_EXTRACT(\"OriginCityName\", '([^,]+)', 0),"
        " REGEXP_LIKE(\"OriginCityName\", '[A-Za-z]+\\s[A-Za-z]+'), TEXTCAT(\"OriginState\", ', USA')"
        ' FROM "flight-carriers"'
    )
    assert run(sql, FLIGHTS) == [
        (
            "San Juan, PR to Washington, DC",
            True,
            True,
            12,
            "san juan, pr",
            "SAN JUAN, PR",
            "Puerto Rico",
            "Puerto Rico",
            11,
            "San Juan",
            True,
            "PR, USA",
        ),
        ("Boston, MA to Chicago, IL", False, False, 10, "boston, ma", "BOSTON, MA", "Massachuset", "Massachuset",
         0, "Boston", False, "MA, USA"),
        ("Miami, FL to Boston, MA", False, False, 9, "miami, fl", "MIAMI, FL", "++++Florida", "Florida++++", 0,
         "Miami", False, "FL, USA"),
    ]  # fmt: skip


def test_string_format_and_ip_match() -> None:  # sql-functions.md: STRING_FORMAT, IPV4_MATCH
    sql = (
        'SELECT STRING_FORMAT(\'Flight No.%d departing from %s\', "Flight_Number_Reporting_Airline", "Origin")'
        ' FROM "flight-carriers" LIMIT 1'
    )
    assert one(sql, FLIGHTS) == "Flight No.314 departing from SJU"
    rows = run(
        "SELECT IPV4_MATCH(a, '181.13.41.0/24') FROM (VALUES ('181.13.41.82'), ('177.242.100.0')) t(a)"
    )
    assert rows == [(True,), (False,)]


def test_null_rules() -> None:  # CONCAT is null when an argument is; LENGTH counts UTF-16 units
    assert one("SELECT CONCAT('a', NULL, 'b')") is None
    assert one("SELECT LENGTH('a\U0001f600')") == 3


def test_conditionals_and_cast() -> None:  # sql-functions.md: CASE, CAST, NULLIF, NVL
    sql = (
        "SELECT CASE \"OriginStateName\" WHEN 'Puerto Rico' THEN 'U.S. Territory' ELSE 'U.S. State' END,"
        ' NULLIF("OriginState", \'PR\'), NVL("Tail_Number", \'No tail number\'), CAST("Distance" AS VARCHAR)'
        ' FROM "flight-carriers" LIMIT 2'
    )
    assert run(sql, FLIGHTS) == [
        ("U.S. Territory", None, "N951DL", "1571.0"),
        ("U.S. State", "MA", "No tail number", "867.0"),
    ]


def test_cast_to_bigint_truncates_as_java() -> None:
    assert run(
        "SELECT CAST(2.7 AS BIGINT), CAST(-2.7 AS BIGINT), CAST('2.7' AS BIGINT), CAST('x' AS BIGINT)"
    ) == [(2, -2, 2, None)]


def test_cast_of_a_value_of_unknown_type_follows_its_type_in_duckdb() -> None:
    # an UNNEST alias on the broker has no type the planner knows; Druid's casts still hold
    # (qaUnnest's mv_sql_agg_funcs: `cast(c AS int)` of the values null, '', '1', '2', '3')
    strings = {"t": "SELECT * FROM (VALUES (['1', '', NULL, '2.7', 'x', ' 3 '])) v(l)"}
    unnest = "FROM t, UNNEST(MV_TO_ARRAY(t.l)) AS u(c)"
    # no ORDER BY: the rows in any order (DuckDB's unnest may hand them out in another)
    assert sorted(run(f"SELECT CAST(c AS INT) {unnest}", strings), key=repr) == sorted(
        [(1,), (None,), (None,), (2,), (None,), (3,)], key=repr
    )
    assert sorted(
        run(f"SELECT CAST(c AS DOUBLE), CAST(c AS DECIMAL(10, 2)) {unnest}", strings), key=repr
    ) == sorted([(1.0, 1.0), (None, None), (None, None), (2.7, 2.7), (None, None), (3.0, 3.0)], key=repr)


def test_aliases() -> None:  # sql-functions.md: CHAR_LENGTH, CHARACTER_LENGTH, STRLEN, SUBSTR, TRUNC
    sql = (
        "SELECT CHAR_LENGTH('San Juan, PR'), CHARACTER_LENGTH('San Juan, PR'), STRLEN('San Juan, PR'),"
        " SUBSTR('abcdefghi', 4, 3), TRUNC(-73.9377670288086, 1)"
    )
    assert run(sql) == [(12, 12, 12, "def", -73.9)]


def test_reduction_types() -> None:  # sql-scalar.md, reduction functions
    # numbers and strings mix as strings; nulls are ignored
    assert run("SELECT GREATEST(1, 'a'), LEAST(2, 10.5), GREATEST(NULL, 3), LEAST(NULL, NULL)") == [
        ("a", 2.0, 3, None)
    ]


def test_doubles_print_as_java_does() -> None:  # Druid prints a DOUBLE with Java's Double.toString
    sql = (
        "SELECT CAST(1571.0 AS VARCHAR), CAST(12345678.0 AS VARCHAR), CAST(0.00001 AS VARCHAR),"
        " CAST(-0.5 AS VARCHAR), CONCAT('x', 1.0E10), CAST(0.1 + 0.2 AS VARCHAR)"
    )
    assert run(sql) == [("1571.0", "1.2345678E7", "1.0E-5", "-0.5", "x1.0E10", "0.30000000000000004")]


# qaUnnest's test_unnest: the values 1, 2, 3 of a multi-value column beside c_long 0, 1, 2
GRID = {"t": "SELECT c, c_long FROM range(1, 4) a(c), range(0, 3) b(c_long)"}


def test_truncate_narrows_as_a_java_long() -> None:
    # Druid's TRUNCATE is (double) (long) (x * 10^d) / 10^d: -Infinity narrows to Long.MIN_VALUE
    # (qaUnnest/mv_sql_scalar_numeric_funcs.01.all.iq line 627: ln(0) is -Infinity)
    sql = "SELECT trunc(ln(c), 11) + trunc(ln(c_long), 11) FROM t"
    assert sorted(row[0] for row in run(sql, GRID)) == [
        -92233720.36854775, -92233719.67540057, -92233719.26993546,
        0.0, 0.69314718055, 0.69314718055, 1.09861228866, 1.3862943611, 1.79175946921,
    ]  # fmt: skip
    # .02.all.iq line 551: NaN (asin of 2, of 3) narrows to 0
    sql = "SELECT trunc(asin(c), 11) + trunc(asin(c_long), 11) FROM t"
    assert sorted(row[0] for row in run(sql, GRID)) == [0.0] * 4 + [1.57079632679] * 4 + [3.14159265358]
    # .02.all.iq line 416: +Infinity (cot of 0) narrows to Long.MAX_VALUE
    sql = "SELECT trunc(cot(c), 11) + trunc(cot(c_long), 11) FROM t WHERE c_long = 0"
    assert sorted(row[0] for row in run(sql, GRID)) == [
        92233713.3532952,
        92233719.91089019,
        92233721.01064037,
    ]


def test_a_long_sum_past_the_range_wraps_around_as_javas() -> None:
    # qaUnnest/mv_sql_scalar_numeric_funcs.03.all.iq line 36: the bits of 2.0 and 2.0 sum to
    # 2^63, Long.MIN_VALUE in Java (DuckDB failed the statement: "Overflow in addition of INT64")
    bits = "bitwise_convert_double_to_long_bits"
    sql = f"SELECT {bits}(CAST(c AS DOUBLE)) + {bits}(c_long) FROM t"
    assert sorted(row[0] for row in run(sql, GRID)) == [
        -9223372036854775808, -9221120237041090560, 4607182418800017408,
        4611686018427387904, 4613937818241073152, 9214364837600034816,
        9218868437227405312, 9218868437227405312, 9221120237041090560,
    ]  # fmt: skip
    extremes = "SELECT a - b, b - a, a + a FROM (VALUES (CAST(-9223372036854775808 AS BIGINT), CAST(1 AS BIGINT))) v(a, b)"
    assert run(extremes) == [(2**63 - 1, -(2**63) + 1, 0)]
