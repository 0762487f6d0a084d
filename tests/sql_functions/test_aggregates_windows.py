"""Aggregate and window functions through `to_duckdb`. Window results are the ones Druid's
documentation publishes (docs/querying/sql-functions.md of apache/druid: the flights from KOA and
LIH on 2005-11-01, grouped by airline); aggregate oracles are the published answers where the
page's data can be rebuilt, else plain Python over the same rows."""

from __future__ import annotations

import math
import statistics

import duckdb
import pytest
import sqlglot

from strata.sql.dialect import DIALECT
from strata.sql.functions import to_duckdb
from tests.sql_functions.kit import one, run

# the per-airline counts of the window examples; `seq` is the page's row order among ties
COUNTS = {
    "c": "SELECT * FROM (VALUES ('KOA','HA',11,1),('KOA','UA',4,2),('KOA','AA',1,3),('KOA','NW',1,4),"
    "('LIH','HA',15,1),('LIH','AA',2,2),('LIH','UA',2,3)) t(Origin, airline, n, seq)"
}
ORDER = '(PARTITION BY "Origin" ORDER BY "n" DESC, "seq")'
RANK_ORDER = '(PARTITION BY "Origin" ORDER BY "n" DESC)'
WINDOWS = [
    (f"RANK() OVER {RANK_ORDER}", [1, 2, 3, 3, 1, 2, 2]),
    (f"DENSE_RANK() OVER {RANK_ORDER}", [1, 2, 3, 3, 1, 2, 2]),
    (f"CUME_DIST() OVER {RANK_ORDER}", [0.25, 0.5, 1, 1, 1 / 3, 1, 1]),
    (f"PERCENT_RANK() OVER {RANK_ORDER}", [0, 1 / 3, 2 / 3, 2 / 3, 0, 0.5, 0.5]),
    (f'FIRST_VALUE("airline") OVER {RANK_ORDER}', ["HA"] * 7),
    (f"ROW_NUMBER() OVER {ORDER}", [1, 2, 3, 4, 1, 2, 3]),
    (f"NTILE(3) OVER {ORDER}", [1, 1, 2, 3, 1, 2, 3]),
    (f'LAG("airline") OVER {ORDER}', [None, "HA", "UA", "AA", None, "HA", "AA"]),
    (f'LEAD("airline") OVER {ORDER}', ["UA", "AA", "NW", None, "AA", "UA", None]),
    (
        f'LAST_VALUE("airline") OVER {ORDER[:-1]} RANGE BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING)',
        ["NW"] * 4 + ["UA"] * 3,
    ),
]


@pytest.mark.parametrize(("call", "expected"), WINDOWS, ids=[c.split("(")[0] for c, _ in WINDOWS])
def test_window_functions(call: str, expected: list[object]) -> None:  # sql-functions.md examples
    rows = run(f'SELECT {call} FROM "c" ORDER BY "Origin", "seq"', COUNTS)
    got = [r[0] for r in rows]
    assert len(got) == len(expected)
    for g, e in zip(got, expected, strict=True):
        assert g == e or (isinstance(e, float) and math.isclose(g, e))


AIRLINES = ["WN", "AA", "UA", "AA", "DL", "AS", "B6", None, "WN", "CO"]
FLIGHTS = {
    "f": "SELECT * FROM (VALUES "
    + ", ".join(
        f"(TIMESTAMP '2005-11-0{1 + i % 2} {10 + i}:00:00', {'NULL' if a is None else repr(a)}, {i * 3 % 7}, {i})"
        for i, a in enumerate(AIRLINES)
    )
    + ") t(__time, airline, delay, i)"
}


def test_string_and_array_agg_distinct_sort() -> None:  # sql-functions.md: STRING_AGG, ARRAY_AGG
    distinct = sorted({a for a in AIRLINES if a is not None})
    sql = 'SELECT STRING_AGG(DISTINCT "airline", \' \'), ARRAY_AGG(DISTINCT "airline", 50000) FROM "f"'
    assert run(sql, FLIGHTS) == [(" ".join(distinct), [None, *distinct])]
    assert one('SELECT LISTAGG("airline") FROM "f" WHERE "i" < 2', FLIGHTS) in ("WNAA", "AAWN")


def test_string_agg_joins_with_a_number_as_its_text() -> None:
    # qaAggFuncs/string_agg_misc_test005.all.iq line 599: STRING_AGG(tab0s0, 1234567890)
    table = {"t": "SELECT * FROM (VALUES ('A'), ('B'), (NULL), ('C')) t(s)"}
    assert run("SELECT STRING_AGG(s, 1234567890) FROM t", table) == [("1234567890".join("ABC"),)]


def test_earliest_latest_by_day() -> None:  # sql-functions.md: EARLIEST, LATEST, *_BY
    sql = (
        'SELECT TIME_FLOOR(__time, \'P1D\'), EARLIEST("airline"), LATEST("airline", 1),'
        ' EARLIEST_BY("airline", MILLIS_TO_TIMESTAMP(0 - "i")), LATEST_BY("i", __time)'
        ' FROM "f" GROUP BY 1 ORDER BY 1'
    )
    day1 = [str(a) for i, a in enumerate(AIRLINES) if i % 2 == 0]  # no null on either day's last row
    day2 = [str(a) for i, a in enumerate(AIRLINES) if i % 2 == 1]
    assert run(sql, FLIGHTS) == [
        ("2005-11-01T00:00:00.000Z", day1[0], day1[-1][:1], day1[-1], 8),
        ("2005-11-02T00:00:00.000Z", day2[0], day2[-1][:1], day2[-1], 9),
    ]


def test_earliest_keeps_a_null_value() -> None:  # first/last take the extreme row, null or not
    assert one('SELECT LATEST("airline") FROM "f" WHERE "i" <= 7', FLIGHTS) is None


def test_bitwise_and_statistics() -> None:
    values = [i * 3 % 7 for i in range(len(AIRLINES))]
    sql = 'SELECT BIT_AND("delay"), BIT_OR("delay"), BIT_XOR("delay"), STDDEV_POP("delay"), VAR_SAMP("delay"), STDDEV("delay") FROM "f"'
    band, bor, bxor, sd_pop, var_samp, sd = run(sql, FLIGHTS)[0]
    # Druid folds `bitwiseAnd(acc, value)` from 0 (BitwiseSqlAggregator's initial value): always 0
    expected_and, expected_or, expected_xor = 0, 0, 0
    for v in values:
        expected_or |= v
        expected_xor ^= v
    assert (band, bor, bxor) == (expected_and, expected_or, expected_xor)
    assert math.isclose(sd_pop, statistics.pstdev(values))
    assert math.isclose(var_samp, statistics.variance(values))
    assert math.isclose(sd, statistics.stdev(values))


def test_filtered_aggregates_rewritten_with_their_filter() -> None:
    sql = (
        'SELECT STRING_AGG("airline", \',\') FILTER (WHERE "i" < 3), COUNT(*) FILTER (WHERE "i" < 3),'
        ' LATEST("airline") FILTER (WHERE "i" < 3) FROM "f"'
    )
    joined, count, latest = run(sql, FLIGHTS)[0]
    assert sorted(joined.split(",")) == sorted(str(a) for a in AIRLINES[:3]) and count == 3
    assert latest == AIRLINES[1]  # 2005-11-02 11:00 is the latest of the three


def test_array_concat_agg_distinct() -> None:  # sql-functions.md: ARRAY_CONCAT_AGG over array-example
    arrays = {
        "a": "SELECT * FROM (VALUES ([1.1, 2.2, NULL]), ([999, NULL, 5.5]), ([NULL, 2.2, 1.1]), ([]::DOUBLE[]),"
        " (NULL)) t(arrayDouble)"
    }
    assert one('SELECT ARRAY_CONCAT_AGG( DISTINCT "arrayDouble") FROM "a"', arrays) == [
        None,
        1.1,
        2.2,
        5.5,
        999,
    ]


def test_array_concat_agg_of_no_array_is_null() -> None:
    # qaArray/ops_funcs_agg_funcs.08.all.iq line 31 on: only null arrays, or no rows, concatenate
    # to null (with DISTINCT too); an empty array is still an array
    arrays = {
        "a": "SELECT * FROM (VALUES (1, NULL::VARCHAR[]), (1, NULL), (2, []::VARCHAR[]), (2, NULL)) t(g, x)"
    }
    for agg in ("ARRAY_CONCAT_AGG(x)", "ARRAY_CONCAT_AGG(DISTINCT x)"):
        assert run(f"SELECT g, {agg} FROM a GROUP BY g ORDER BY g", arrays) == [(1, None), (2, [])]
        assert run(f"SELECT {agg} FROM a WHERE g > 5", arrays) == [(None,)]


def test_grouping_sets() -> None:  # sql-functions.md: GROUPING
    sql = (
        'SELECT CASE WHEN GROUPING("Origin") = 1 THEN \'Total\' ELSE "Origin" END, GROUPING("Origin"), SUM("n")'
        ' FROM "c" GROUP BY GROUPING SETS("Origin", ()) ORDER BY 2, 1'
    )
    assert run(sql, COUNTS) == [("KOA", 0, 17), ("LIH", 0, 19), ("Total", 1, 36)]


def test_count_distinct_exact_or_approximate() -> None:
    """Druid's default (useApproximateCountDistinct) counts with an HLL sketch: exact at this size."""
    from tests.sql_functions.kit import run_approximate

    sql = 'SELECT COUNT(DISTINCT "airline"), COUNT(DISTINCT "airline") FILTER (WHERE "i" < 4) FROM "f"'
    distinct = len({a for a in AIRLINES if a is not None})
    first = len({a for a in AIRLINES[:4] if a is not None})
    assert run(sql, FLIGHTS) == [(distinct, first)]
    assert run_approximate(sql, FLIGHTS) == [(distinct, first)]


def test_calendar_interval_in_zone() -> None:  # Druid shifts months on sqlTimeZone's calendar
    sql = (
        "SELECT TIMESTAMP '2000-03-30 20:00:00' - INTERVAL '1' MONTH,"
        " TIMESTAMP '2000-03-15 12:00:00' + INTERVAL '1' MONTH"
    )
    # Mar 30 20:00 PST (Mar 31 04:00Z) - 1 month is Feb 29 20:00 PST; noon PST + 1 month is noon PDT
    assert run(sql, zone="America/Los_Angeles") == [("2000-03-01T04:00:00.000Z", "2000-04-15T19:00:00.000Z")]
    assert run("SELECT TIMESTAMP '2000-01-31 23:00:00' + INTERVAL '1' DAY") == [("2000-02-01T23:00:00.000Z",)]


def test_long_sum_stays_bigint_and_earliest_without_time() -> None:
    rows = run('SELECT SUM("n"), SUM("n") FILTER (WHERE "n" > 4) FROM "c"', COUNTS)
    assert rows == [(36, 26)]
    tree = sqlglot.parse_one('SELECT SUM("n") AS s FROM "c"', dialect=DIALECT)
    rewritten = to_duckdb(
        tree, None, schema={"c": {"Origin": "VARCHAR", "airline": "VARCHAR", "n": "BIGINT"}}
    )
    with duckdb.connect() as conn:
        conn.execute(f"CREATE TABLE c AS {COUNTS['c']}")
        assert conn.execute(f"SELECT typeof(s) FROM ({rewritten.sql(dialect='duckdb')})").fetchall() == [
            ("BIGINT",)
        ]
    # a relation without __time: EARLIEST is the first value met (Druid's rule), here a 1-row table
    assert one('SELECT EARLIEST("airline") FROM "c" WHERE "seq" = 4', COUNTS) == "NW"


def test_basic_aggregates_and_variances() -> None:  # sql-functions.md: MIN, MAX, AVG, VAR_*, STDDEV_*
    values = [i * 3 % 7 for i in range(len(AIRLINES))]
    sql = (
        'SELECT MIN("delay"), MAX("delay"), AVG("delay"), STDDEV_SAMP("delay"), VARIANCE("delay"),'
        ' VAR_POP("delay"), ANY_VALUE("delay") FROM "f"'
    )
    low, high, mean, sd, var, var_pop, anything = run(sql, FLIGHTS)[0]
    assert (low, high) == (min(values), max(values)) and anything in values
    assert math.isclose(mean, statistics.mean(values)) and math.isclose(sd, statistics.stdev(values))
    assert math.isclose(var, statistics.variance(values)) and math.isclose(
        var_pop, statistics.pvariance(values)
    )


def test_any_value_keeps_the_first_value_even_a_null() -> None:
    # qaUnnest/array_sql_agg_funcs.07.all.iq line 529: of the unnested [1, 2, null], [null, 1, 2],
    # [2, null, 1] grouped by row, ANY_VALUE is null for the row that starts with null
    rows = {"t": "SELECT * FROM (VALUES (1, [1, 2, NULL]), (2, [NULL, 1, 2]), (3, [2, NULL, 1])) t(s, a)"}
    sql = "SELECT s, ANY_VALUE(c) FROM t, UNNEST(a) AS u(c) GROUP BY s ORDER BY s"
    assert run(sql, rows) == [(1, 1), (2, None), (3, 2)]


def test_fixed_buckets_quantile() -> None:
    """The worked example of Druid's FixedBucketsHistogram documentation (apache/druid,
    extensions-core/histogram): 7 values, buckets of 2 from 0 to 8, 3 values below 6 and 4 in
    6-8: the 75th percentile is 6 + ((5.25 - 3) / 4) * 2 = 7.125."""
    table = {"h": "SELECT * FROM (VALUES (1.0), (3.0), (5.0), (6.5), (7.0), (7.2), (7.9), (100.0)) t(x)"}
    sql = (
        "SELECT APPROX_QUANTILE_FIXED_BUCKETS(x, 0.75, 4, 0, 8, 'ignore'),"
        " APPROX_QUANTILE_FIXED_BUCKETS(x, 0.75, 4, 0, 8) FILTER (WHERE x > 100) FROM h"
    )
    assert run(sql, table) == [(7.125, 0.0)]  # the outlier 100 is ignored; no values give 0.0


def test_aggregates_over_windows() -> None:  # sql-window-functions.md: aggregates as window functions
    sql = (
        'SELECT "airline", SUM("n") OVER (PARTITION BY "Origin"), COUNT(*) OVER (),'
        ' EARLIEST("airline") OVER (PARTITION BY "Origin" ORDER BY "seq")'
        ' FROM "c" WHERE "seq" = 1 ORDER BY "Origin"'
    )
    assert run(sql, COUNTS) == [("HA", 11, 2, "HA"), ("HA", 15, 2, "HA")]


def test_bitwise_aggregates_cast_strings_as_druid_does() -> None:
    # qaUnnest/mv_sql_agg_funcs.05.all.iq line 653: BIT_AND over the unnested strings
    # [null, '', '1', '2', '3'] of three rows is 0 ('' is not a number: null, skipped)
    table = {"u": "SELECT * FROM (VALUES (NULL), (''), ('1'), ('2'), ('3')) t(c)"}
    assert run("SELECT BIT_AND(c), BIT_OR(c), BIT_XOR(c) FROM u", table) == [(0, 3, 0)]


def test_bitwise_aggregates_per_group_as_druid_folds_them() -> None:
    # qaUnnest/mv_sql_agg_funcs.05.all.iq lines 653-904: grouped by the unnested strings, each value
    # three times: BIT_AND is 0 (Druid's fold starts from 0), BIT_OR and BIT_XOR of '' are 0 (a row
    # that is not null counts, its value adds nothing), and of the null group null
    table = {"u": "SELECT c FROM (VALUES (NULL), (''), ('1'), ('2'), ('3')) t(c), range(3)"}
    sql = "SELECT c, BIT_AND(c), BIT_OR(c), BIT_XOR(c) FROM u GROUP BY c ORDER BY c"
    assert run(sql, table) == [
        (None, None, None, None),
        ("", 0, 0, 0),
        ("1", 0, 1, 1),
        ("2", 0, 2, 2),
        ("3", 0, 3, 3),
    ]


# qatests/qaUnnest/array: test_unnest's times, s_int and a_int
TEST_UNNEST = {
    "test_unnest": "SELECT * FROM (VALUES "
    "(TIMESTAMP '2022-01-01', 1, [1, 2, NULL]::BIGINT[]), (TIMESTAMP '2022-02-01', 2, [NULL, 1, 2]::BIGINT[]), "
    "(TIMESTAMP '2022-03-01', NULL, [2, NULL, 1]::BIGINT[])) t(__time, s_int, a_int)"
}


def test_earliest_of_an_unnested_value_orders_by_the_rows_time() -> None:
    # qaUnnest/array_sql_agg_funcs.04.all.iq line 118: one group per element, each with its earliest
    # value (an UNNEST alias has no __time of its own: its rows have the unnested row's)
    sql = (
        "SELECT count(*) cnt FROM (SELECT earliest(c) AS col FROM test_unnest, unnest(a_int) AS u(c) "
        "GROUP BY c)"
    )
    assert run(sql, TEST_UNNEST) == [(3,)]


def test_unnested_rows_keep_each_rows_elements_together() -> None:
    # qaUnnest/mv_sql_agg_funcs.04.all.iq line 539 and .05 line 223: Druid's unnest hands on each
    # row's values in turn, so ARRAY_AGG and STRING_AGG collect them row after row
    table = {"t": "SELECT c_long, [NULL, '', '1', '2', '3'] AS c_mv FROM range(3) r(c_long)"}
    unnested = "FROM t, UNNEST(MV_TO_ARRAY(c_mv)) AS u(c)"
    assert run(f"SELECT ARRAY_AGG(c_long) {unnested}", table) == [([0] * 5 + [1] * 5 + [2] * 5,)]
    assert run(f"SELECT STRING_AGG(c, '|') {unnested}", table) == [("|1|2|3||1|2|3||1|2|3",)]


# qatests/qaUnnest/mv: three rows of one time, each holding the values [null, '', '1', '2', '3']
SAME_TIME = {
    "t": "SELECT TIMESTAMP '2022-01-01' AS __time, c_long, [NULL, '', '1', '2', '3'] AS c_mv"
    " FROM range(3) r(c_long)"
}


def test_latest_of_one_times_unnested_rows_is_the_last_element() -> None:
    # qaUnnest/mv_sql_agg_funcs.03.all.iq lines 497, 709, 921: Druid's last aggregators keep the
    # last row read among those of the greatest time (`time >= lastTime`), and the rows unnested
    # from one row share its time: LATEST of each row's elements is its last, '3'; EARLIEST keeps
    # the first row read (`time < firstTime`), the null
    unnested = "FROM t, UNNEST(MV_TO_ARRAY(c_mv)) AS u(c) GROUP BY c_long ORDER BY c_long"
    sql = (
        "SELECT c_long, LATEST(c, 100), LATEST_BY(CAST(c AS INT), TIME_FLOOR(__time, 'P1D')),"
        f" EARLIEST(c, 100), EARLIEST_BY(c, __time) {unnested}"
    )
    assert run(sql, SAME_TIME) == [(i, "3", 3, None, None) for i in range(3)]
    having = f"SELECT c_long {unnested.split(' ORDER')[0]} HAVING LATEST(c, 100) IS NOT NULL"
    assert len(run(having, SAME_TIME)) == 3


def test_latest_over_two_unnests_orders_by_the_outer_element_first() -> None:
    # Druid's cursor reads, for each element of the first UNNEST, every element of the second
    table = {"t": "SELECT TIMESTAMP '2022-01-01' AS __time, ['a', 'b'] AS x, [1, 2, 3] AS y"}
    sql = (
        "SELECT LATEST(u.a, 10), LATEST(v.b), EARLIEST(u.a, 10), EARLIEST(v.b)"
        " FROM t, UNNEST(x) AS u(a), UNNEST(y) AS v(b)"
    )
    assert run(sql, table) == [("b", 3, "a", 1)]
