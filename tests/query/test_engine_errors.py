"""Engine failures as Druid's error categories (strata.query.engine_errors), with the exceptions the
engines really raise, and regular expressions refused where the query is parsed."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from strata.query import parse_query
from strata.query.engine_errors import query_engine_error, unforeseen
from strata.query.errors import (
    Defensive,
    InvalidInput,
    QueryError,
    QueryInterrupted,
    QueryUnsupported,
    ResourceLimitExceeded,
    RuntimeFailure,
    UnknownException,
)
from strata.query.expressions.parser import parse_expression
from strata.query.regex_check import check_regex


def _raised(fn: Callable[[], Any]) -> BaseException:
    try:
        fn()
    except BaseException as e:
        return e
    raise AssertionError("nothing raised")


def _duck(sql: str) -> BaseException:
    return _raised(lambda: duckdb.connect().execute(sql).fetchall())


@pytest.mark.parametrize(
    ("make", "kind", "status", "category"),
    [
        (lambda: _duck("SELECT regexp_matches('a', '(((((')"), InvalidInput, 400, "INVALID_INPUT"),
        (lambda: _duck("SELECT CAST('x' AS INTEGER)"), InvalidInput, 400, "INVALID_INPUT"),
        (lambda: _duck("SELECT 9223372036854775807::BIGINT + 1"), InvalidInput, 400, "INVALID_INPUT"),
        (lambda: _duck('SELECT NULL AS ""'), InvalidInput, 400, "INVALID_INPUT"),
        (lambda: _duck("SELECT nope(1)"), InvalidInput, 400, "INVALID_INPUT"),
        (lambda: _duck("SELECT * FROM read_parquet('/nonexistent/x.parquet')"), RuntimeFailure, 500,
         "RUNTIME_FAILURE"),
        (lambda: duckdb.OutOfMemoryException("could not allocate"), ResourceLimitExceeded, 400, "CAPACITY_EXCEEDED"),
        (lambda: duckdb.InterruptException("interrupted"), QueryInterrupted, 500, "RUNTIME_FAILURE"),
        (lambda: duckdb.NotImplementedException("not implemented"), QueryUnsupported, 501, "UNSUPPORTED"),
        (lambda: duckdb.InternalException("INTERNAL Error: Attempted to access index 3"), Defensive, 500,
         "DEFENSIVE"),
        (lambda: _raised(lambda: pc.cast(pa.array([2**40]), pa.int8())), InvalidInput, 400, "INVALID_INPUT"),
        (lambda: _raised(lambda: pa.array([[1]], pa.string())), Defensive, 500, "DEFENSIVE"),
        (lambda: MemoryError(), ResourceLimitExceeded, 400, "CAPACITY_EXCEEDED"),
        (lambda: RecursionError("maximum recursion depth exceeded"), InvalidInput, 400, "INVALID_INPUT"),
        (lambda: OverflowError("int too large to convert"), InvalidInput, 400, "INVALID_INPUT"),
        (lambda: FileNotFoundError("segment.parquet"), RuntimeFailure, 500, "RUNTIME_FAILURE"),
    ],
)  # fmt: skip
def test_engine_failures_become_druid_categories(make: Any, kind: type, status: int, category: str) -> None:
    error = query_engine_error(make(), "historical:8083")
    assert type(error) is kind and error.status == status and error.category == category, error.error_message
    body = error.to_body("historical:8083")
    assert {"error", "errorCode", "persona", "category", "errorMessage", "context"} <= set(body)
    for leak in ("\x1b", "Invalid Input Error", "Conversion Error", "Parser Error", "INTERNAL Error", "LINE 1",
                 "Traceback", "duckdb.", "pyarrow.lib"):  # fmt: skip
        assert leak not in error.error_message, error.error_message


def test_only_a_bug_of_our_own_stays_the_catch_all() -> None:
    ours = query_engine_error(ValueError("a bug of ours"))
    assert isinstance(ours, UnknownException) and ours.error == "Unknown exception" and unforeseen(ours)
    assert unforeseen(query_engine_error(duckdb.InternalException("INTERNAL Error: x")))
    assert not unforeseen(query_engine_error(duckdb.ConversionException("Conversion Error: x")))
    kept = InvalidInput("as planned")
    assert query_engine_error(kept) is kept


def test_druid_exception_bodies_carry_no_legacy_keys_in_their_context() -> None:
    body = RuntimeFailure("disk gone").to_body("h:1")
    assert body["error"] == "druidException" and body["errorCode"] == "general"
    assert body["persona"] == "OPERATOR" and body["context"] == {}
    assert Defensive("bug").to_body("h:1")["persona"] == "DEVELOPER"


@pytest.mark.parametrize("pattern", ["(((((", "[a-", "*", "a{2,1}", "\\", ")"])
def test_a_pattern_no_engine_compiles_is_a_400_naming_it(pattern: str) -> None:
    with pytest.raises(InvalidInput, match=r"Invalid regular expression \[") as caught:
        check_regex(pattern, "regex filter")
    assert "regex filter" in caught.value.error_message


@pytest.mark.parametrize("pattern", ["(?<=a)b", "(?=x)", "(a)\\1", "(?!y)z"])
def test_java_only_syntax_is_a_501(pattern: str) -> None:
    with pytest.raises(QueryUnsupported, match="RE2"):
        check_regex(pattern, "regex filter")


def test_patterns_are_checked_wherever_a_native_query_holds_one() -> None:
    base = {"queryType": "timeseries", "dataSource": "w", "intervals": ["2015/2016"], "granularity": "all",
            "aggregations": [{"type": "count", "name": "c"}]}  # fmt: skip
    bad = "((("
    filters = [
        {"type": "regex", "dimension": "page", "pattern": bad},
        {"type": "search", "dimension": "page", "query": {"type": "regex", "pattern": bad}},
        {
            "type": "selector",
            "dimension": "page",
            "value": "x",
            "extractionFn": {"type": "regex", "expr": bad},
        },
        {
            "type": "selector",
            "dimension": "page",
            "value": "x",
            "extractionFn": {"type": "partial", "expr": bad},
        },
        {"type": "expression", "expression": f"regexp_like(page, '{bad}')"},
        {"type": "expression", "expression": f"regexp_extract(page, '{bad}', 1) == 'a'"},
    ]
    for flt in filters:
        with pytest.raises(InvalidInput, match="Invalid regular expression"):
            parse_query({**base, "filter": flt})
    with pytest.raises(InvalidInput):
        parse_expression(f"concat('x', regexp_replace(page, '{bad}', 'y'))")
    assert parse_expression("regexp_extract(page, '(\\\\w+)', 1)") is not None


def test_a_range_bound_past_a_long_is_still_a_query() -> None:
    query = parse_query({"queryType": "timeseries", "dataSource": "w", "intervals": ["2015/2016"],
                         "granularity": "all", "aggregations": [{"type": "count", "name": "c"}],
                         "filter": {"type": "range", "column": "added", "matchValueType": "LONG",
                                    "lower": 2**64, "upper": 1e308}})  # fmt: skip
    flt = getattr(query, "filter", None)
    assert flt is not None and isinstance(flt.to_json()["lower"], float)


@pytest.mark.parametrize(
    "fn",
    [
        {"type": "substring", "index": 1, "length": "x"},
        {"type": "substring", "index": 1, "length": [1]},
        {"type": "regex", "expr": "(a)", "index": "x"},
        {"type": "timeFormat", "format": "yyyy", "timeZone": 5},
        {"type": "cascade", "extractionFns": [{"type": ["lower"]}]},
    ],
)
def test_extraction_functions_refuse_fields_of_the_wrong_type(fn: dict[str, Any]) -> None:
    query = {"queryType": "topN", "dataSource": "w", "intervals": ["2015/2016"], "granularity": "all",
             "dimension": {"type": "extraction", "dimension": "page", "outputName": "d", "extractionFn": fn},
             "metric": "c", "threshold": 3, "aggregations": [{"type": "count", "name": "c"}]}  # fmt: skip
    with pytest.raises(QueryError) as caught:
        parse_query(query)
    assert caught.value.status == 400
