"""LONG `+` and `-` as Java's longs: past the range they wrap around (what Druid answers), checked
against Python's exact integers reduced to 64 bits; and a chain of sums stays linear in size (a
form that named its operands again grew 4x a term, and a six-term sum stalled DuckDB's planner)."""

from __future__ import annotations

import random
from functools import reduce

import duckdb
import pytest

from strata.query.expressions.typed import java_long_sum

LOW, HIGH = -(2**63), 2**63 - 1


def _java(x: int, op: str, y: int) -> int:
    exact = x + y if op == "+" else x - y
    return (exact - LOW) % 2**64 + LOW


def _bigint(v: int) -> str:
    return f"CAST({v} AS BIGINT)"


def test_sums_and_differences_wrap_as_javas_longs() -> None:
    rng = random.Random(37)
    edges = [LOW, LOW + 1, -1, 0, 1, HIGH - 1, HIGH, 2**62, -(2**62)]
    pairs = [(x, y) for x in edges for y in edges]
    pairs += [(rng.randint(LOW, HIGH), rng.randint(LOW, HIGH)) for _ in range(500)]
    conn = duckdb.connect()
    for op in "+-":
        sql = ", ".join(java_long_sum(_bigint(x), op, _bigint(y)) for x, y in pairs)
        got = conn.execute(f"SELECT {sql}").fetchone()
        assert list(got or ()) == [_java(x, op, y) for x, y in pairs]


@pytest.mark.parametrize("op", ["+", "-"])
def test_a_null_operand_gives_null(op: str) -> None:
    conn = duckdb.connect()
    assert conn.execute(f"SELECT {java_long_sum('CAST(NULL AS BIGINT)', op, '1')}").fetchone() == (None,)


def test_a_chain_of_thirty_sums_is_linear_in_size_and_exact() -> None:
    values = [HIGH, HIGH, 5, LOW, -7, *range(25)]
    terms = [_bigint(v) for v in values]
    sql = reduce(lambda acc, term: java_long_sum(acc, "+", term), terms)
    one = len(java_long_sum("a", "+", "b"))
    assert len(sql) < len(values) * (one + 40)
    want = reduce(lambda acc, v: _java(acc, "+", v), values)
    assert duckdb.connect().execute(f"SELECT {sql}").fetchone() == (want,)
