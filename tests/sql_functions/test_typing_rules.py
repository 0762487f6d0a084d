"""Druid's typing rules applied to the statements the broker's DuckDB runs (`strata.sql.typing_rules`,
then `strata.sql.functions.to_duckdb`, as composed plans run them), over small tables, against
answers of Druid's QA files."""

from __future__ import annotations

import duckdb
import pyarrow as pa
import sqlglot

from strata.sql.composed import ComposedPlan
from strata.sql.dialect import DIALECT
from strata.sql.functions import install, to_duckdb
from strata.sql.typing_rules import integer_division

# qatests/qaUnnest/mv: c_long of five rows, and c_mv_num_with_null_and_empty_val unnested
LONGS = pa.table({"c_long": pa.array([0, 1, 2, 3, 4], pa.int64())})
STRINGS = pa.table({"c": pa.array([None, "", "1", "2", "3"], pa.string())})
MULTI_VALUE = pa.table({"c_long": pa.array([1], pa.int64()), "mv": [[None, "", "1", "2", "3"]]})


def _rows(sql: str) -> list[tuple[object, ...]]:
    tables = {"t1": LONGS, "t2": STRINGS, "m": MULTI_VALUE}
    tree = integer_division(
        sqlglot.parse_one(sql, read=DIALECT), {name: table.schema for name, table in tables.items()}
    )
    conn = duckdb.connect()
    try:
        install(conn)
        for name, table in tables.items():
            conn.register(name, table)
        return sorted(conn.execute(to_duckdb(tree, None).sql(dialect="duckdb")).fetchall())
    finally:
        conn.close()


def test_a_string_joined_with_a_long_is_cast_as_druid_casts() -> None:
    # qaUnnest/mv_sql_join.01.std.iq line 755 joins `t1.c_long = t2.c`: Calcite casts the string to
    # BIGINT, '' and null are null and match nothing (DuckDB's own cast fails on '')
    assert _rows("SELECT t1.c_long, t2.c FROM t1 INNER JOIN t2 ON t1.c_long = t2.c") == [
        (1, "1"),
        (2, "2"),
        (3, "3"),
    ]
    assert _rows("SELECT count(*) FROM t1, t2 WHERE t2.c < t1.c_long") == [(6,)]  # 1<2,3,4; 2<3,4; 3<4


def test_an_unnested_multi_value_string_joined_with_a_long_is_cast_as_druid_casts() -> None:
    # qaUnnest/mv_sql_join.01.std.iq 23: the join key is the element of UNNEST(MV_TO_ARRAY(..)),
    # whose type sqlglot did not know, so DuckDB cast '' itself and failed the statement
    unnested = "(SELECT u.c FROM m, UNNEST(MV_TO_ARRAY(m.mv)) AS u(c))"
    assert _rows(f"SELECT t1.c_long, t2.c FROM t1 INNER JOIN {unnested} t2 ON t1.c_long = t2.c") == [
        (1, "1"),
        (2, "2"),
        (3, "3"),
    ]


def test_elements_unnested_from_json_value_returning_an_array_have_its_element_type() -> None:
    # qaUnnest/array_sql_scalar_numeric_funcs.03.all.iq line 1090: safe_divide(c, s_int) of the
    # BIGINTs of `json_value(a_nested, '$[1]' RETURNING bigint array)` divides as LONGs (1 / 2 is 0)
    unnested = "FROM t1, UNNEST(JSON_VALUE('[1, 2, 3]', '$' RETURNING BIGINT ARRAY)) AS u(c) WHERE c_long = 2"
    assert _rows(f"SELECT c, safe_divide(c, c_long), c / c_long {unnested}") == [
        (1, 0, 0),
        (2, 1, 1),
        (3, 1, 1),
    ]


def test_a_composed_statement_types_a_stages_strings() -> None:
    # qaAggFuncs/array_agg_long_test004.all.iq line 262: ARRAY_TO_STRING of a subquery's string is
    # that string (Druid's planner types `col` VARCHAR); untyped, DuckDB's list function refused it
    stage = pa.table({"col": pa.array(["1|22|333"], pa.string())})
    outer = sqlglot.parse_one("SELECT STRLEN(ARRAY_TO_STRING(col, '|')) AS len FROM s", read=DIALECT)
    plan = ComposedPlan([], outer, tables={"s": stage})
    conn = duckdb.connect()
    try:
        install(conn)
        answer = plan.start(conn, [])
        batch = answer.next_batch()
        assert batch is not None and answer.rows(batch) == [[8]]
    finally:
        conn.close()
