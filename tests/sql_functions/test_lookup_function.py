"""LOOKUP(expr, 'name'[, replaceMissingValueWith]) in the broker's DuckDB path and in the native
planner's expression writer, over a lookup loaded into this process's registry; the expected rows
are the map applied in Python."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import sqlglot

from strata.lookups.registry import REGISTRY
from strata.lookups.spec import LookupContainer
from strata.query.errors import InvalidInput
from strata.sql.dialect import DIALECT
from strata.sql.expressions import ExpressionWriter
from tests.sql_functions.kit import run

CODES = {"US": "United States", "FR": "France"}
VALUES = ["US", "FR", "DE", None]


@pytest.fixture
def loaded() -> Iterator[None]:
    REGISTRY.sync({"codes": LookupContainer("v1", {"type": "map", "map": CODES})})
    try:
        yield
    finally:
        REGISTRY.sync({})


def test_lookup_maps_values_in_the_broker_engine(loaded: None) -> None:
    table = {"t": "SELECT * FROM (VALUES ('US'), ('FR'), ('DE'), (NULL)) AS v(a)"}
    got = run("SELECT a, LOOKUP(a, 'codes') FROM t", table)
    assert sorted(got, key=str) == sorted(((v, CODES.get(v or "")) for v in VALUES), key=str)
    got = run("SELECT a, LOOKUP(a, 'codes', 'n/a') FROM t", table)
    assert sorted(got, key=str) == sorted(((v, CODES.get(v or "", "n/a")) for v in VALUES), key=str)


def test_an_unknown_lookup_is_named() -> None:
    with pytest.raises(InvalidInput, match=r"Lookup \[nope\] not found"):
        run("SELECT LOOKUP(a, 'nope') FROM t", {"t": "SELECT 'x' AS a"})


def test_lookup_is_written_as_druids_native_expression() -> None:
    node = sqlglot.parse_one("SELECT LOOKUP(a, 'codes', 'n/a')", dialect=DIALECT).expressions[0]
    assert ExpressionWriter(0).write(node) == "lookup(\"a\", 'codes', 'n/a')"
