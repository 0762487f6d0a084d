"""DruidSQL parses Druid's own function syntax that sqlglot's Druid dialect misreads."""

from __future__ import annotations

import pytest
import sqlglot
from sqlglot import exp

from strata.sql.dialect import DIALECT


def _item(sql: str) -> exp.Expr:
    return sqlglot.parse_one(sql, dialect=DIALECT).expressions[0]


def test_timestampdiff_and_timestampadd_take_a_unit() -> None:
    diff = _item("SELECT TIMESTAMPDIFF(DAY, a, b)")
    assert isinstance(diff, exp.TimestampDiff)
    assert (diff.unit.name, diff.expression.name, diff.this.name) == ("DAY", "a", "b")
    add = _item("SELECT TIMESTAMPADD (MONTH, 5, __time)")
    assert isinstance(add, exp.TimestampAdd) and add.unit.name == "MONTH"
    assert add.sql(dialect=DIALECT) == "TIMESTAMPADD(MONTH, 5, __time)"


def test_position_from_pi_div_any_value() -> None:
    position = _item("SELECT POSITION('PR' IN city FROM 5)")
    assert isinstance(position, exp.StrPosition) and position.args["position"].name == "5"
    assert _item("SELECT PI").name == "PI" and _item("SELECT PI()").name == "PI"
    assert _item('SELECT "PI" FROM t').name == "PI" and isinstance(_item('SELECT "PI" FROM t'), exp.Column)
    assert _item("SELECT DIV(78, 10)").name == "DIV"
    any_value = _item("SELECT ANY_VALUE(x, 100, true)")
    assert any_value.name == "ANY_VALUE" and len(any_value.expressions) == 3
    assert isinstance(_item("SELECT ANY_VALUE(x)"), exp.AnyValue)


def test_round_trip_through_druid_sql() -> None:
    for sql in (
        "SELECT TIMESTAMPDIFF(DAY, a, b)",
        "SELECT POSITION('a' IN b FROM 2)",
        "SELECT DIV(a, b)",
        "SELECT TIMESTAMPADD(HOUR, -1, __time)",
    ):
        tree = sqlglot.parse_one(sql, dialect=DIALECT)
        assert sqlglot.parse_one(tree.sql(dialect=DIALECT), dialect=DIALECT) == tree


def test_is_predicates_bind_looser_than_comparisons() -> None:
    # Calcite's precedence, which Druid parses with: qaUnnest/array_sql_scalar_numeric_funcs.01.all.iq
    # line 526 keeps the rows where `floor(c+s_int)<99999 IS NULL` is `(floor(c+s_int) < 99999) IS NULL`
    assert _item("SELECT a < b IS NULL").sql(dialect=DIALECT) == "(a < b) IS NULL"
    assert _item("SELECT a = b IS NOT TRUE").sql(dialect=DIALECT) == "NOT (a = b) IS TRUE"
    assert isinstance(_item("SELECT NOT a IS NULL"), exp.Not)  # NOT still binds looser than IS
    assert isinstance(_item("SELECT a IS NULL = FALSE"), exp.EQ)
    assert isinstance(_item("SELECT a + b IS NULL").this, exp.Add)


def test_bracket_literals_are_syntax_errors_as_in_calcite() -> None:
    """DuckDB's `[...]` and `{...}` literals are not Druid SQL: Calcite's parser refuses them, so
    Strata does too (a statement Druid refuses is never answered); ARRAY[...], MAP[...],
    subscripts and JDBC's `{fn ...}` escapes parse as before."""
    for sql, token, col in (
        ("SELECT [1, 2, 3]", "[", 8),
        ("SELECT ARRAY[[1, 2, 3], [1, 2, 3]] FROM t", "[", 14),
        ("SELECT {'a': 1}", "{", 8),
        ("SELECT x FROM t WHERE x IN ([1])", "[", 29),
    ):
        with pytest.raises(sqlglot.errors.ParseError) as caught:
            sqlglot.parse_one(sql, dialect=DIALECT)
        (error,) = caught.value.errors
        assert error["description"] == f"Received an unexpected token [{token}]", sql
        assert (error["line"], error["col"]) == (1, col), sql
    for sql in (
        "SELECT ARRAY[1, 2][1]",
        "SELECT ARRAY[ARRAY[1], ARRAY[2]]",
        "SELECT MAP['a', 1]",
        'SELECT a[1], "b"[2], (ARRAY[1])[1] FROM t',
        "SELECT {fn UCASE('a')}",
    ):
        assert sqlglot.parse_one(sql, dialect=DIALECT).sql(dialect=DIALECT), sql
