"""Dynamic parameters bound as literals of their declared types (`strata.sql.parameters`), checked
by parsing the bound statement and reading the literal back."""

from __future__ import annotations

from typing import Any

import pytest
import sqlglot
from sqlglot import exp

from strata.query.errors import InvalidInput
from strata.sql.dialect import DIALECT
from strata.sql.parameters import bind


def bound(parameter: Any) -> exp.Expr:
    tree = sqlglot.parse_one(bind("SELECT ? FROM t", [parameter]), read=DIALECT)
    assert isinstance(tree, exp.Select)
    return tree.expressions[0]


def test_each_type_becomes_its_literal() -> None:
    assert bound({"type": "VARCHAR", "value": "it's"}).this == "it's"
    assert bound({"type": "BIGINT", "value": "42"}).sql() == "42"
    assert bound({"type": "DOUBLE", "value": 1}).sql() == "1.0"
    assert isinstance(bound({"type": "BOOLEAN", "value": "true"}), exp.Boolean)
    ts = bound({"type": "TIMESTAMP", "value": "2015-09-12T01:00:00Z"})
    assert isinstance(ts, exp.Cast) and ts.to.is_type("timestamp") and ts.this.this == "2015-09-12 01:00:00"
    millis = bound({"type": "TIMESTAMP", "value": 1442019600000})
    assert millis.this.this == "2015-09-12 01:00:00.000"
    date = bound({"type": "DATE", "value": "2015-09-12"})
    assert isinstance(date, exp.Cast) and date.to.is_type("date")
    assert isinstance(bound({"type": "ARRAY", "value": [1, "a"]}), exp.Array)
    null = bound({"type": "BIGINT", "value": None})
    assert isinstance(null, exp.Cast) and null.to.is_type("bigint")


def test_placeholders_in_quotes_and_comments_are_text() -> None:
    sql = "SELECT '?', \"a?\" -- ?\n, ? /* ? */ FROM t"
    assert bind(sql, [{"type": "BIGINT", "value": 7}]) == "SELECT '?', \"a?\" -- ?\n, 7 /* ? */ FROM t"


@pytest.mark.parametrize(
    ("sql", "parameters"),
    [
        ("SELECT ?, ?", [1]),
        ("SELECT ?", [1, 2]),
        ("SELECT ?", [{"type": "BIGINT", "value": "x"}]),
        ("SELECT ?", [{"type": "DOUBLE", "value": "NaN"}]),
        ("SELECT ?", [{"type": "BOOLEAN", "value": "maybe"}]),
        ("SELECT ?", [{"type": "TIMESTAMP", "value": "x' OR 1=1 --"}]),
        ("SELECT ?", {"type": "BIGINT"}),
    ],
)
def test_bad_parameters_are_400s(sql: str, parameters: Any) -> None:
    with pytest.raises(InvalidInput):
        bind(sql, parameters)
