"""The SQL request guard and the engine-error mapping, without a cluster: what the guard lets through
parses without a RecursionError, what it refuses is refused before any parser runs, in linear time."""

from __future__ import annotations

import contextlib
import random
import threading
from typing import Any

import duckdb
import pytest
import sqlglot
from sqlglot import errors as sqlglot_errors

from strata.query.context import QueryContext
from strata.query.errors import InvalidInput, QueryError, QueryUnsupported, ResourceLimitExceeded
from strata.query.header_values import MAX_HEADER_VALUE_CHARS
from strata.sql.engine_errors import engine_error
from strata.sql.guard import (
    MAX_NESTING,
    MAX_OPERATOR_CHAIN,
    MAX_STATEMENT_CHARS,
    check_body,
    check_statement,
    query_id,
)

WHERE = "SELECT COUNT(*) FROM wikipedia WHERE "
NESTED = {
    "parentheses": lambda d: WHERE + "(" * d + "added > 1" + ")" * d,
    "NOT chain": lambda d: WHERE + "NOT " * d + "added > 1",
    "sign chain": lambda d: "SELECT SUM(" + "- " * (d - 1) + "added) FROM wikipedia",
    "CASE": lambda d: "SELECT " + "CASE WHEN added > 1 THEN " * d + "1" + " END" * d + " FROM wikipedia",
    "function calls": lambda d: "SELECT " + "ABS(" * d + "added" + ")" * d + " FROM wikipedia",
    "subqueries": lambda d: WHERE + "added IN " + "(SELECT " * d + "1" + ")" * d,
    "arrays": lambda d: "SELECT " + "ARRAY[" * d + "1" + "]" * d,
}


def refused(sql: str) -> str:
    with pytest.raises(InvalidInput) as caught:
        check_statement(sql)
    return caught.value.error_message


@pytest.mark.parametrize("shape", sorted(NESTED))
def test_nesting_at_the_limit_passes_and_one_more_is_refused(shape: str) -> None:
    check_statement(NESTED[shape](MAX_NESTING))
    assert f"limit of {MAX_NESTING} levels" in refused(NESTED[shape](MAX_NESTING + 1))
    assert "line [1], column [" in refused(NESTED[shape](1000))


def test_levels_of_different_kinds_add_up() -> None:
    half = MAX_NESTING // 2
    check_statement(WHERE + "NOT (" * half + "added > 1" + ")" * half)
    refused(WHERE + "NOT (" * (half + 1) + "added > 1" + ")" * (half + 1))
    refused("SELECT " + "CASE WHEN NOT (" * 12 + "added > 1" + ") THEN 1 END" * 12 + " FROM wikipedia")


def test_what_is_not_nesting_is_not_counted() -> None:
    """Siblings, strings, quoted names and comments: only open levels count."""
    check_statement(WHERE + " AND ".join(["NOT (added > 1)"] * 5000))
    check_statement(WHERE + " OR ".join(f"(channel = '#{i}')" for i in range(5000)))
    check_statement("SELECT '" + "(" * 5000 + "' AS \"" + "((" * 100 + '" FROM wikipedia')
    check_statement("SELECT 1 -- " + "(" * 5000 + "\n, /* " + "NOT " * 5000 + " */ 2")
    check_statement("SELECT channel FROM wikipedia WHERE page = 'it''s ((((' AND added - -1 > 0")
    check_statement("SELECT a - b - c, x IS NOT NULL, NOT NOT TRUE FROM t")


def test_operator_chains() -> None:
    chain = lambda n: "SELECT " + " + ".join(["added"] * (n + 1)) + " FROM wikipedia"  # noqa: E731
    check_statement(chain(MAX_OPERATOR_CHAIN))
    assert f"more than {MAX_OPERATOR_CHAIN} arithmetic operators" in refused(chain(MAX_OPERATOR_CHAIN + 1))
    # chains in sibling expressions do not add up; nested ones do
    check_statement("SELECT " + ", ".join([" || ".join(["channel"] * 200)] * 20) + " FROM wikipedia")
    refused("SELECT " + "added * (" * 20 + " + ".join(["added"] * 250) + ")" * 20 + " FROM wikipedia")


def test_the_position_of_the_refusal() -> None:
    assert "line [3], column [36]" in refused("SELECT\n  1\n   " + "(" * 40 + "1" + ")" * 40)


def test_statement_size() -> None:
    in_list = WHERE + "channel IN (" + ",".join(f"'c{i}'" for i in range(200_000)) + ")"
    assert len(in_list) > MAX_STATEMENT_CHARS
    assert f"limit of {MAX_STATEMENT_CHARS}" in refused(in_list)
    check_statement(in_list[: MAX_STATEMENT_CHARS - 1] + ")")


@pytest.mark.parametrize(
    "text",
    ["/*" * 400_000, "'" + "a" * 900_000, '"' + "(" * 900_000, "(" * 10 + "/*" * 400_000, "- " * 450_000,
     "x''" * 300_000, "((" + ")" * 900_000, "END " * 200_000],
)  # fmt: skip
@pytest.mark.timeout(60)  # a quadratic scan of ~1M characters takes hours: the bound fails it
def test_the_scan_is_linear_in_the_text(text: str) -> None:
    with contextlib.suppress(InvalidInput):
        check_statement(text)


def _parse_in_thread(sql: str) -> BaseException | None:
    """sqlglot's parse and SQL generation in a fresh worker thread, as the broker runs them."""
    outcome: list[BaseException | None] = [None]

    def parse() -> None:
        try:
            sqlglot.parse_one(sql, read="druid").sql(dialect="duckdb")
        except BaseException as e:
            outcome[0] = e

    worker = threading.Thread(target=parse)
    worker.start()
    worker.join(30)
    return outcome[0]


def _random_nesting(rnd: random.Random, depth: int) -> str:
    text = "added"
    for _ in range(depth):
        text = rnd.choice(["({})", "NOT {}", "- {}", "ABS({})", "CASE WHEN {} THEN 1 END", "COALESCE(1, {})",
                           "(SELECT {})", "CAST({} AS BIGINT)", "{} + 1", "1 * ({})"]).format(text)  # fmt: skip
    return "SELECT " + text + " FROM wikipedia"


def test_what_the_guard_passes_parses_without_recursion_errors() -> None:
    """sqlglot (an independent parser) as the oracle: every statement the guard lets through parses
    in a worker thread; the ones it refuses would have overflowed."""
    rnd = random.Random(26)
    passed = refused_count = 0
    for _ in range(300):
        sql = _random_nesting(rnd, rnd.randint(1, 80))
        try:
            check_statement(sql)
        except InvalidInput:
            refused_count += 1
            continue
        error = _parse_in_thread(sql)
        assert not isinstance(error, RecursionError), sql
        passed += 1
    assert passed > 50 and refused_count > 50
    assert isinstance(_parse_in_thread(NESTED["parentheses"](1000)), RecursionError)  # what is guarded


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ("SELECT 1", "Request body"),
        ([{"query": "SELECT 1"}], "Request body"),
        ({"query": 5}, "[query]"),
        ({"query": None}, "[query]"),
        ({}, "[query]"),
        ({"query": "SELECT 1", "context": "x"}, "[context]"),
        ({"query": "SELECT 1", "context": ["sqlQueryId", "a"]}, "[context]"),
        ({"query": "SELECT 1", "parameters": "x"}, "[parameters]"),
        ({"query": "SELECT 1", "parameters": {"value": 1}}, "[parameters]"),
        ({"query": "SELECT ?", "parameters": [{"type": "VARCHAR", "value": {"a": 1}}]}, "Parameter [1]"),
        ({"query": "SELECT 1", "resultFormat": 5}, "[resultFormat]"),
        ({"query": "SELECT 1", "header": "yes"}, "[header]"),
        ({"query": "SELECT 1", "typesHeader": [True]}, "[typesHeader]"),
        ({"query": "SELECT 1", "sqlTypesHeader": 2}, "[sqlTypesHeader]"),
    ],
)
def test_wrong_json_types_are_invalid_input_naming_the_field(body: Any, field: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        check_body(body)
    assert field in caught.value.error_message and caught.value.status == 400


def test_a_valid_body_comes_back_with_boolean_flags() -> None:
    body = check_body({"query": "SELECT ?, ?", "context": None, "parameters": [{"type": "BIGINT", "value": 1},
                                                                           {"type": "ARRAY", "value": [1, 2]}],
                       "header": "true", "typesHeader": 1})  # fmt: skip
    assert (body["header"], body["typesHeader"], body["sqlTypesHeader"]) == (True, True, False)


@pytest.mark.parametrize(
    "bad",
    ["a\x00b", "id\r\nX-Injected: 1", "tab\tbed", "\x7f", "\x85", "\u2028", "a" * (MAX_HEADER_VALUE_CHARS + 1),
     {"id": 1}, ["a"], True, 1.5],
)  # fmt: skip
def test_query_ids_that_cannot_be_a_header_value_are_refused(bad: Any) -> None:
    with pytest.raises(InvalidInput) as caught:
        query_id({"sqlQueryId": bad}, "default")
    assert "sqlQueryId" in caught.value.error_message


def test_a_native_query_id_that_cannot_be_a_header_value_is_refused() -> None:
    with pytest.raises(InvalidInput, match=r"\[queryId\]"):
        QueryContext.parse({"queryId": "a\r\nb"})
    assert QueryContext.parse({"queryId": "q-1"}).query_id == "q-1"


def test_query_ids_that_can_be_a_header_value() -> None:
    assert query_id({}, "d") == "d" and query_id({"sqlQueryId": ""}, "d") == "d"
    assert query_id({"sqlQueryId": 42}, "d") == "42"
    assert query_id({"sqlQueryId": "my query ~ 1"}, "d") == "my query ~ 1"
    assert query_id({"sqlQueryId": "caf\u00e9"}, "d") == "caf\u00e9"  # Latin-1 is a header's bytes


def _raised(fn: Any) -> BaseException:
    try:
        fn()
    except BaseException as e:
        return e
    raise AssertionError("nothing raised")


def _duck(sql: str) -> BaseException:
    return _raised(lambda: duckdb.connect().execute(sql))


@pytest.mark.parametrize(
    ("make", "kind", "status", "says"),
    [
        (lambda: _raised(lambda: sqlglot.parse_one("SELECT * FROM WHERE", read="druid")), InvalidInput, 400,
         "line [1], column [19]: Expected table name but got [WHERE]"),
        (lambda: _raised(lambda: sqlglot.parse_one("SELECT 1 +* FROM", read="druid")), InvalidInput, 400,
         "got the end of the statement"),
        (lambda: _raised(lambda: sqlglot.parse_one("SELECT (1", read="druid")), InvalidInput, 400, "parse"),
        (lambda: sqlglot_errors.UnsupportedError("PIVOT"), QueryUnsupported, 501, "PIVOT"),
        (lambda: sqlglot_errors.OptimizeError("Column 'x' could not be resolved"), InvalidInput, 400, "'x'"),
        (lambda: _duck("SELECT millis_to_timestamp(1)"), QueryUnsupported, 501, "[MILLIS_TO_TIMESTAMP]"),
        (lambda: _duck("SELECT * FROM nowhere"), InvalidInput, 400, "'nowhere' not found"),
        (lambda: _duck("SELECT nope FROM (SELECT 1 AS a)"), InvalidInput, 400, "nope"),
        (lambda: _duck("SELECT CAST('x' AS INTEGER)"), InvalidInput, 400, "'x'"),
        (lambda: _duck("SELEC 1"), QueryUnsupported, 501, "syntax error"),
        (lambda: duckdb.NotImplementedException("window in this place"), QueryUnsupported, 501, "window"),
        (lambda: duckdb.OutOfMemoryException("failed to allocate"), ResourceLimitExceeded, 400, "memory"),
        (lambda: RecursionError("maximum recursion depth exceeded"), InvalidInput, 400, f"{MAX_NESTING} levels"),
        (lambda: MemoryError(), ResourceLimitExceeded, 400, "memory"),
    ],
)  # fmt: skip
def test_engine_errors_become_druid_categories(make: Any, kind: type, status: int, says: str) -> None:
    error = engine_error(make(), "broker:8082")
    assert type(error) is kind and error.status == status, error.error_message
    assert says in error.error_message
    for leak in ("\x1b", "sqlglot", "<class", "Binder Error", "Catalog Error", "Parser Error", "Conversion Error",
                 "LINE 1", "Traceback"):  # fmt: skip
        assert leak not in error.error_message, error.error_message


def test_only_the_unforeseen_is_a_500_and_it_carries_no_engine_text() -> None:
    internal = engine_error(duckdb.InternalException("INTERNAL Error: Attempted to access index 3"))
    assert internal.status == 500 and "INTERNAL" not in internal.error_message
    assert engine_error(ValueError("our own bug")).status == 500
    kept = InvalidInput("as planned")
    assert engine_error(kept) is kept and isinstance(engine_error(QueryError("x")), QueryError)


_PIECES = ["(", ")", "[", "]", "CASE ", " END", "NOT ", "not ", "- ", "+", "~", "*", "/", "||", "<<", ",",
           " x", " 1", "'(('", "-- ((\n", "/* NOT */", "SELECT ", " WHERE "]  # fmt: skip


def _scan_verdict(sql: str) -> bool:
    from strata.sql import guard

    original = guard._within_limits_at_a_glance
    guard._within_limits_at_a_glance = lambda _sql: False  # type: ignore[assignment]
    try:
        check_statement(sql)
        return True
    except InvalidInput:
        return False
    finally:
        guard._within_limits_at_a_glance = original


@pytest.mark.parametrize("seed", range(4))
def test_the_glance_never_lets_through_what_the_scan_refuses(seed: int) -> None:
    """The character-count shortcut may only skip the token scan where the scan would accept."""
    from strata.sql.guard import _within_limits_at_a_glance

    rng = random.Random(seed)
    for _ in range(400):
        sql = "".join(rng.choice(_PIECES) for _ in range(rng.randint(0, 300)))
        if _within_limits_at_a_glance(sql):
            assert _scan_verdict(sql), sql
