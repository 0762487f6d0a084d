"""`IS NULL` over a subquery's NOT NULL column, folded as Druid's planner (Calcite) folds it. The
expected answers are Druid's, from its QA files (`tests/sql_corpus/druid_qa/qaAggFuncs/`): the
inner values there are null, yet the outer `col IS NULL` does not hold."""

from __future__ import annotations

import duckdb
import sqlglot

from strata.sql.dialect import DIALECT
from strata.sql.nullability import fold_having_null_tests, fold_null_tests, never_null


def _item(sql: str) -> sqlglot.exp.Expr:
    select = sqlglot.parse_one(f"SELECT {sql}", dialect=DIALECT)
    assert isinstance(select, sqlglot.exp.Select)
    return select.expressions[0]


def test_declared_types() -> None:
    # Druid declares ARRAY_ORDINAL_OF INTEGER and ARRAY_TO_STRING VARCHAR (NOT NULL), ARRAY_OFFSET_OF
    # nullable INTEGER, ARRAY_SLICE and LENGTH as nullable as their argument, ARRAY_AGG and COUNT
    # NOT NULL
    assert never_null(_item("array_ordinal_of(array_agg(x), 11.1111111)"))
    assert not never_null(_item("array_offset_of(array_agg(x), 11.1111111)"))
    assert never_null(_item("array_slice(array_agg(DISTINCT x, 100000), 100, 101)"))
    assert not never_null(_item("array_slice(x, 0, 1)"))
    assert never_null(_item("length(array_to_string(array_agg(DISTINCT x), ''))"))
    assert not never_null(_item("length(x)"))
    assert never_null(_item("count(*)"))
    assert not never_null(_item("x"))


def _count(sql: str, inner_value: object) -> int:
    """The outer count of `sql` (a count over a one-row subquery reading `t`) with the subquery's
    one value `inner_value` put in place of the subquery, after folding."""
    tree = sqlglot.parse_one(sql, dialect=DIALECT)
    assert isinstance(tree, sqlglot.exp.Select)
    sub = tree.args["from_"].this
    folded = fold_null_tests(tree.copy(), sub.this)
    folded.set("from_", sqlglot.exp.From(this=sqlglot.exp.to_table("inner_row")))
    conn = duckdb.connect()
    conn.execute("CREATE TABLE inner_row AS SELECT ? AS col", [inner_value])
    row = conn.execute(folded.sql(dialect="duckdb")).fetchone()
    assert row is not None
    return int(row[0])


def test_is_null_of_a_not_null_column_is_false() -> None:
    # array_agg_float_test001.all.iq line 259: over no rows the ordinal is null, Druid counts 0
    ordinal = (
        "SELECT count(*) cnt FROM (SELECT array_ordinal_of(array_agg(tab0f0), 11.1111111) AS col"
        " FROM test_agg_funcs WHERE tab0f0>111 AND tab0f0<222) WHERE col != 99999 OR col IS NULL"
    )
    assert _count(ordinal, None) == 0
    # line 223: ARRAY_OFFSET_OF is nullable, so the same shape counts the null row (1)
    assert _count(ordinal.replace("array_ordinal_of", "array_offset_of"), None) == 1
    # array_agg_double_test001.all.iq line 458: a slice past the end is null, Druid counts 0
    sliced = (
        "SELECT count(*) cnt FROM (SELECT array_slice(array_agg(tab0d0), 100, 101) AS col"
        " FROM test_agg_funcs WHERE tab0d0>111 AND tab0d0<222)"
        " WHERE NOT array_contains(col, 99999) OR col IS NULL"
    )
    assert _count(sliced.replace("array_contains(col, 99999)", "list_contains(col, 99999)"), None) == 0


def test_array_to_string_is_never_null_to_the_planner() -> None:
    # array_agg_double_test002.all.iq line 556: the null group's string is null (its array is
    # [null]), yet of the three groups Druid counts two
    joined = (
        "SELECT count(*) cnt FROM (SELECT array_to_string(array_agg(DISTINCT t0.tab0d0), '') AS col"
        " FROM test_agg_funcs t0 GROUP BY t0.tab0d0) WHERE col != 'ABCD' OR col IS NULL"
    )
    assert _count(joined, None) == 0


def test_picking_an_array_is_never_null_in_having() -> None:
    # qaArray/ops_funcs_agg_funcs.05.all.iq line 2 on (EARLIEST, LATEST, the _BY forms, ANY_VALUE):
    # of a VARCHAR ARRAY Druid types them VARCHAR NOT NULL, so HAVING .. IS NOT NULL keeps the
    # group whose value is null (Druid's answer: one row, null)
    nested = "json_value(a_nested, '$[7][7]' RETURNING varchar array)"
    for agg in (f"earliest({nested})", f"latest_by({nested}, time_floor(__time, 'P1D'), 1000)",
                f"any_value({nested})"):  # fmt: skip
        tree = sqlglot.parse_one(
            f"SELECT {agg} AS col FROM test_array GROUP BY {nested} HAVING {agg} IS NOT NULL", dialect=DIALECT
        )
        folded = fold_having_null_tests(tree)
        assert folded.args["having"].this == sqlglot.exp.Not(this=sqlglot.exp.false())
    # of a scalar the test stays
    scalar = sqlglot.parse_one(
        "SELECT earliest(x) FROM t GROUP BY y HAVING earliest(x) IS NOT NULL", dialect=DIALECT
    )
    assert fold_having_null_tests(scalar) == scalar
