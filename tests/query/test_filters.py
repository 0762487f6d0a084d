"""Filters against a plain-Python oracle written per case, in SQL-compatible null mode.

Each case gives the filter JSON and a three-valued predicate over the raw row (True, False or
None for unknown). The filter must match exactly the rows where the predicate is True, and
`not(filter)` exactly the rows where it is False: that checks Druid's null semantics both ways.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest

from strata.query.duck import connection, quote_ident
from strata.query.errors import InvalidInput, QueryUnsupported
from strata.query.filters import parse_filter
from strata.query.string_comparators import compare_alphanumeric, compare_version

STRINGS = [
    "a",
    "b",
    "B",
    "abc",
    "10",
    "9",
    "1.5",
    "-2",
    "007",
    "x'y",
    "back\\slash",
    "50%",
    "5_0",
    "",
    None,
    "ünïcödé",
    "日本",
    "Ke$ha",
    "a10",
    "a9",
    "A2",
    "1.0",
    "1.10",
    "1.0-alpha",
    None,
    "NaN",
]
N = len(STRINGS)
ROWS = [
    {
        "__time": 1442016000000 + i * 3_600_000,
        "s": s,
        "n": None if i % 7 == 3 else i - 5,
        "d": None if i % 5 == 4 else (i - 5) * 0.5,
    }
    for i, s in enumerate(STRINGS)
]
TYPES = {"__time": "BIGINT", "s": "VARCHAR", "n": "BIGINT", "d": "DOUBLE"}
TABLE = pa.table(
    {
        "__time": pa.array([r["__time"] for r in ROWS], pa.int64()),
        "s": pa.array([r["s"] for r in ROWS], pa.string()),
        "n": pa.array([r["n"] for r in ROWS], pa.int64()),
        "d": pa.array([r["d"] for r in ROWS], pa.float64()),
    }
)
Pred = Callable[[dict[str, Any]], bool | None]


def matching(filter_json: dict[str, Any]) -> set[int]:
    flt = parse_filter(filter_json)
    assert flt is not None
    conn = connection()
    conn.register("filter_rows", TABLE)
    try:
        # Columns no row has are all-null, as scan_relation presents them.
        missing = "".join(
            f", CAST(NULL AS VARCHAR) AS {quote_ident(c)}" for c in sorted(flt.columns()) if c not in TYPES
        )
        sql = f"SELECT __time FROM (SELECT *{missing} FROM filter_rows) WHERE {flt.to_sql(TYPES)}"
        times = [t for (t,) in conn.execute(sql).fetchall()]
    finally:
        conn.unregister("filter_rows")
    return {(t - 1442016000000) // 3_600_000 for t in times}


def expect(filter_json: dict[str, Any], pred: Pred) -> None:
    verdicts = [pred(r) for r in ROWS]
    assert matching(filter_json) == {i for i, v in enumerate(verdicts) if v is True}
    negated = {i for i, v in enumerate(verdicts) if v is False}
    assert matching({"type": "not", "field": filter_json}) == negated


def unknown_if_null(col: str, test: Callable[[Any], bool]) -> Pred:
    return lambda r: None if r[col] is None else test(r[col])


def num(text: str) -> Decimal | None:
    return Decimal(text) if re.fullmatch(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?", text) else None


def java_str(v: Any) -> str:
    return str(v) if not isinstance(v, float) else repr(v)


# -- equality --------------------------------------------------------------------------------------
@pytest.mark.parametrize("value", ["a", "", "x'y", "back\\slash", "日本", "10", "nope"])
def test_selector_string(value: str) -> None:
    expect({"type": "selector", "dimension": "s", "value": value}, unknown_if_null("s", lambda x: x == value))


def test_selector_null_matches_nulls_and_its_negation_matches_the_rest() -> None:
    expect({"type": "selector", "dimension": "s", "value": None}, lambda r: r["s"] is None)
    expect({"type": "selector", "dimension": "s"}, lambda r: r["s"] is None)


def test_selector_on_missing_column_matches_only_null() -> None:
    assert matching({"type": "selector", "dimension": "nope", "value": None}) == set(range(N))
    assert matching({"type": "selector", "dimension": "nope", "value": "x"}) == set()


@pytest.mark.parametrize("value", ["1", 1, "1.0", "1.5", "abc", "-5"])
def test_selector_on_long_column_compares_the_number(value: Any) -> None:
    number = num(str(value))
    exact = number if number is not None and number == number.to_integral_value() else None
    expect(
        {"type": "selector", "dimension": "n", "value": value},
        unknown_if_null("n", lambda x: exact is not None and x == exact),
    )


def test_selector_on_double_column() -> None:
    expect({"type": "selector", "dimension": "d", "value": "1.5"}, unknown_if_null("d", lambda x: x == 1.5))
    expect({"type": "selector", "dimension": "d", "value": "2"}, unknown_if_null("d", lambda x: x == 2.0))


def test_selector_on_time() -> None:
    t = ROWS[4]["__time"]
    assert matching({"type": "selector", "dimension": "__time", "value": str(t)}) == {4}


def test_equals_typed() -> None:
    expect(
        {"type": "equals", "column": "s", "matchValueType": "STRING", "matchValue": "B"},
        unknown_if_null("s", lambda x: x == "B"),
    )
    expect(
        {"type": "equals", "column": "n", "matchValueType": "LONG", "matchValue": 3},
        unknown_if_null("n", lambda x: x == 3),
    )
    # A numeric match value against a string column compares numbers ("1.5" and "1.50" alike); a
    # string that is no number does not match (Druid's EqualityFilter: false, not unknown).
    expect(
        {"type": "equals", "column": "s", "matchValueType": "DOUBLE", "matchValue": 1.5},
        lambda r: None if r["s"] is None else num(r["s"]) == Decimal("1.5"),
    )


def test_null_filter() -> None:
    expect({"type": "null", "column": "n"}, lambda r: r["n"] is None)
    expect({"type": "null", "column": "d"}, lambda r: r["d"] is None)


def test_in_with_and_without_null() -> None:
    values = ["a", "B", "x'y", "missing"]
    expect({"type": "in", "dimension": "s", "values": values}, unknown_if_null("s", lambda x: x in values))
    expect(
        {"type": "in", "dimension": "s", "values": [*values, None]},
        lambda r: True if r["s"] is None else r["s"] in values,
    )
    expect(
        {"type": "in", "dimension": "n", "values": ["1", "2", "x", 3]},
        unknown_if_null("n", lambda x: x in (1, 2, 3)),
    )


def test_in_type_as_druids_sql_planner_writes_it() -> None:
    """Druid 28+'s typed IN (`inType`, `sortedValues`): SQL's `IN`, with a null among the values
    matching null rows, as Druid's typed IN does."""
    values = ["a", "B", "missing"]
    expect(
        {"type": "inType", "column": "s", "matchValueType": "STRING", "sortedValues": values},
        unknown_if_null("s", lambda x: x in values),
    )
    expect(
        {"type": "inType", "column": "n", "matchValueType": "LONG", "sortedValues": [None, 1, 3]},
        lambda r: True if r["n"] is None else r["n"] in (1, 3),
    )
    flt = parse_filter({"type": "inType", "column": "s", "matchValueType": "STRING", "values": ["b", "a"]})
    assert flt is not None and flt.to_json()["sortedValues"] == ["a", "b"]


def test_in_empty_matches_nothing() -> None:
    assert matching({"type": "in", "dimension": "s", "values": []}) == set()


# -- ranges ----------------------------------------------------------------------------------------
def test_bound_lexicographic() -> None:
    expect(
        {"type": "bound", "dimension": "s", "lower": "B", "upper": "b", "upperStrict": True},
        unknown_if_null("s", lambda x: "B" <= x < "b"),
    )
    expect(
        {"type": "bound", "dimension": "s", "lower": "a", "lowerStrict": True},
        unknown_if_null("s", lambda x: x > "a"),
    )


def numeric_cmp(a: str, b: str) -> int:
    x, y = num(a), num(b)
    if x is not None and y is not None:
        return (x > y) - (x < y)
    if x is None and y is None:
        return (a > b) - (a < b)
    return -1 if x is None else 1


@pytest.mark.parametrize(
    ("lower", "upper"), [("-2", "10"), ("1.5", None), (None, "9"), ("abc", None), (None, "b")]
)
def test_bound_numeric_on_strings(lower: str | None, upper: str | None) -> None:
    def pred(x: str) -> bool:
        ok = lower is None or numeric_cmp(x, lower) >= 0
        return ok and (upper is None or numeric_cmp(x, upper) <= 0)

    known = unknown_if_null("s", pred)
    expect(
        {"type": "bound", "dimension": "s", "lower": lower, "upper": upper, "ordering": "numeric"},
        # Druid's BoundFilter: null sorts before every value, so only a lower bound excludes it
        lambda r: (True if lower is None else None) if r["s"] is None else known(r),
    )


def test_bound_without_lower_matches_null() -> None:
    expect(
        {"type": "bound", "dimension": "s", "upper": "b", "upperStrict": True},
        lambda r: True if r["s"] is None else r["s"] < "b",
    )
    expect(
        {"type": "bound", "dimension": "n", "upper": "2", "ordering": "numeric"},
        lambda r: True if r["n"] is None else r["n"] <= 2,
    )
    expect(
        {"type": "bound", "dimension": "d", "lower": "-1", "upper": "2", "ordering": "numeric"},
        unknown_if_null("d", lambda x: -1 <= x <= 2),
    )


def test_bound_numeric_on_numbers() -> None:
    expect(
        {
            "type": "bound",
            "dimension": "n",
            "lower": "-3",
            "upper": 4,
            "lowerStrict": True,
            "ordering": "numeric",
        },
        unknown_if_null("n", lambda x: -3 < x <= 4),
    )
    expect(
        {"type": "bound", "dimension": "d", "lower": "0.5", "ordering": {"type": "numeric"}},
        unknown_if_null("d", lambda x: x >= 0.5),
    )


def test_bound_strlen() -> None:
    expect(
        {"type": "bound", "dimension": "s", "lower": "ab", "upper": "zzz", "ordering": "strlen"},
        unknown_if_null("s", lambda x: (len(x), x) >= (2, "ab") and (len(x), x) <= (3, "zzz")),
    )


def test_bound_alphanumeric_and_legacy_flag() -> None:
    pred = unknown_if_null(
        "s", lambda x: compare_alphanumeric(x, "a2") >= 0 and compare_alphanumeric(x, "a10") < 0
    )
    expect(
        {
            "type": "bound",
            "dimension": "s",
            "lower": "a2",
            "upper": "a10",
            "upperStrict": True,
            "ordering": "alphanumeric",
        },
        pred,
    )
    expect(
        {
            "type": "bound",
            "dimension": "s",
            "lower": "a2",
            "upper": "a10",
            "upperStrict": True,
            "alphaNumeric": True,
        },
        pred,
    )
    # pydruid sends both: alphaNumeric false with ordering numeric is consistent.
    both = parse_filter(
        {"type": "bound", "dimension": "s", "lower": "1", "alphaNumeric": False, "ordering": "numeric"}
    )
    assert both is not None and both.to_json()["ordering"] == "numeric"
    with pytest.raises(InvalidInput):
        parse_filter(
            {"type": "bound", "dimension": "s", "lower": "1", "alphaNumeric": True, "ordering": "numeric"}
        )


def test_alphanumeric_comparator_hand_cases() -> None:
    ordered = ["", "2", "007", "10", "a2", "A3", "a9", "a10", "a10b", "b"]
    for x, y in itertools.pairwise(ordered):
        assert compare_alphanumeric(x, y) == -1, (x, y)
        assert compare_alphanumeric(y, x) == 1, (y, x)
    assert compare_alphanumeric(None, "a") == -1


def test_version_comparator_hand_cases() -> None:
    ordered = ["1.0-alpha", "1.0-beta", "1.0-rc1", "1.0-SNAPSHOT", "1.0", "1.0.1", "1.2", "1.10", "2"]
    for x, y in itertools.pairwise(ordered):
        assert compare_version(x, y) == -1, (x, y)
    assert compare_version("1.0", "1") == 0
    expect(
        {"type": "bound", "dimension": "s", "lower": "1.0", "upper": "1.9", "ordering": "version"},
        unknown_if_null("s", lambda x: compare_version(x, "1.0") >= 0 and compare_version(x, "1.9") <= 0),
    )


def test_range_typed() -> None:
    expect(
        {
            "type": "range",
            "column": "n",
            "matchValueType": "LONG",
            "lower": -2,
            "upper": 6,
            "upperOpen": True,
        },
        unknown_if_null("n", lambda x: -2 <= x < 6),
    )
    expect(
        {"type": "range", "column": "s", "matchValueType": "DOUBLE", "lower": 1, "lowerOpen": True},
        lambda r: None if r["s"] is None or num(r["s"]) is None else num(r["s"]) > 1,  # type: ignore[operator]
    )
    expect(
        {"type": "range", "column": "s", "matchValueType": "STRING", "upper": "a"},
        unknown_if_null("s", lambda x: x <= "a"),
    )


def test_interval_filter_on_time() -> None:
    expect(
        {
            "type": "interval",
            "dimension": "__time",
            "intervals": [
                "2015-09-12T02:00:00Z/2015-09-12T05:00:00Z",
                "2015-09-12T20:00:00Z/2015-09-13T01:00:00Z",
            ],
        },
        lambda r: (
            2 <= (r["__time"] - 1442016000000) // 3_600_000 < 5
            or 20 <= (r["__time"] - 1442016000000) // 3_600_000 < 25
        ),
    )


# -- patterns --------------------------------------------------------------------------------------
def like_oracle(pattern: str, escape: str | None) -> Callable[[str], bool]:
    regex, escaping = "", False
    for ch in pattern:
        if escaping:
            regex += re.escape(ch)
            escaping = False
        elif ch == escape:
            escaping = True
        elif ch == "%":
            regex += ".*"
        elif ch == "_":
            regex += "."
        else:
            regex += re.escape(ch)
    compiled = re.compile(regex, re.DOTALL)
    return lambda x: compiled.fullmatch(x) is not None


@pytest.mark.parametrize(
    ("pattern", "escape"),
    [
        ("a%", None),
        ("_", None),
        ("%\\%", None),
        ("50\\%", "\\"),
        ("5\\_0", "\\"),
        ("5_0", None),
        ("x'%", None),
        ("back\\slash", None),
        ("%!%%", "!"),
        ("日_", None),
        ("", None),
    ],
)
def test_like(pattern: str, escape: str | None) -> None:
    flt: dict[str, Any] = {"type": "like", "dimension": "s", "pattern": pattern}
    if escape is not None:
        flt["escape"] = escape
    expect(flt, unknown_if_null("s", like_oracle(pattern, escape)))


def test_like_on_numbers_uses_their_string_form() -> None:
    expect(
        {"type": "like", "dimension": "n", "pattern": "-%"},
        unknown_if_null("n", lambda x: str(x).startswith("-")),
    )


@pytest.mark.parametrize("pattern", ["^a", "b", "[0-9]+$", "^$", "\\$", "ü", "(?i)^b$"])
def test_regex_find_semantics(pattern: str) -> None:
    expect(
        {"type": "regex", "dimension": "s", "pattern": pattern},
        unknown_if_null("s", lambda x: re.search(pattern, x) is not None),
    )


def test_search_filter_specs() -> None:
    expect(
        {
            "type": "search",
            "dimension": "s",
            "query": {"type": "contains", "value": "b", "caseSensitive": "false"},
        },
        unknown_if_null("s", lambda x: "b" in x.lower()),
    )
    expect(
        {
            "type": "search",
            "dimension": "s",
            "query": {"type": "contains", "value": "b", "caseSensitive": True},
        },
        unknown_if_null("s", lambda x: "b" in x),
    )
    expect(
        {"type": "search", "dimension": "s", "query": {"type": "insensitive_contains", "value": "KE$"}},
        unknown_if_null("s", lambda x: "ke$" in x.lower()),
    )
    expect(
        {"type": "search", "dimension": "s", "query": {"type": "fragment", "values": ["A", "c"]}},
        unknown_if_null("s", lambda x: "a" in x.lower() and "c" in x.lower()),
    )
    expect(
        {"type": "search", "dimension": "s", "query": {"type": "contains", "value": "%"}},
        unknown_if_null("s", lambda x: "%" in x),
    )


# -- logic -----------------------------------------------------------------------------------------
def test_and_or_not_three_valued() -> None:
    a = {"type": "selector", "dimension": "s", "value": "a"}
    n_pos = {"type": "bound", "dimension": "n", "lower": "0", "ordering": "numeric"}

    def p_a(r: dict[str, Any]) -> bool | None:
        return None if r["s"] is None else r["s"] == "a"

    def p_n(r: dict[str, Any]) -> bool | None:
        return None if r["n"] is None else r["n"] >= 0

    def and3(x: bool | None, y: bool | None) -> bool | None:
        if x is False or y is False:
            return False
        return None if x is None or y is None else True

    def or3(x: bool | None, y: bool | None) -> bool | None:
        if x is True or y is True:
            return True
        return None if x is None or y is None else False

    expect({"type": "and", "fields": [a, n_pos]}, lambda r: and3(p_a(r), p_n(r)))
    expect({"type": "or", "fields": [a, n_pos]}, lambda r: or3(p_a(r), p_n(r)))
    expect(
        {"type": "or", "fields": [{"type": "not", "field": a}, n_pos]},
        lambda r: or3(None if p_a(r) is None else not p_a(r), p_n(r)),
    )
    assert matching({"type": "true"}) == set(range(N))
    assert matching({"type": "false"}) == set()


def test_columns_and_canonical_json() -> None:
    flt = parse_filter(
        {
            "type": "and",
            "fields": [
                {"type": "selector", "dimension": "s", "value": 1},
                {"type": "not", "field": {"type": "in", "dimension": "n", "values": ["2", "1", "2"]}},
                {"type": "interval", "dimension": "__time", "intervals": ["2015-09-12/P1D"]},
            ],
        }
    )
    assert flt is not None
    assert flt.columns() == {"s", "n", "__time"}
    as_json = flt.to_json()
    assert as_json["fields"][0] == {"type": "selector", "dimension": "s", "value": "1"}
    assert as_json["fields"][1]["field"]["values"] == ["1", "2"]
    assert parse_filter(as_json) == flt  # canonical JSON round-trips
    assert parse_filter(None) is None


# -- errors ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "bad",
    [
        {"type": "nope", "dimension": "s"},
        {"dimension": "s"},
        {"type": "selector"},
        {"type": "and", "fields": []},
        {"type": "not"},
        {"type": "bound", "dimension": "s"},
        {"type": "bound", "dimension": "s", "lower": "a", "ordering": "sideways"},
        {"type": "range", "column": "n", "matchValueType": "LONG"},
        {"type": "range", "column": "n", "matchValueType": "LONG", "lower": "x"},
        {"type": "equals", "column": "s", "matchValueType": "STRING", "matchValue": None},
        {"type": "like", "dimension": "s", "pattern": "a", "escape": "ab"},
        {"type": "regex", "dimension": "s", "pattern": "(unclosed"},
        {"type": "interval", "dimension": "__time", "intervals": ["not an interval"]},
        {"type": "search", "dimension": "s", "query": {"type": "telepathy"}},
        "selector",
    ],
)
def test_invalid_filters_are_400(bad: Any) -> None:
    with pytest.raises(InvalidInput) as err:
        parse_filter(bad)
    assert err.value.status == 400


@pytest.mark.parametrize(
    "unsupported",
    [
        {"type": "javascript", "dimension": "s", "function": "function(x){return true}"},
        {"type": "and", "fields": [{"type": "spatial", "dimension": "s", "bound": {}}]},
    ],
)
def test_unsupported_filters_are_501(unsupported: dict[str, Any]) -> None:
    with pytest.raises(QueryUnsupported) as err:
        parse_filter(unsupported)
    assert err.value.status == 501


def test_literals_cannot_inject_sql() -> None:
    evil = "a') OR TRUE OR ('"
    assert matching({"type": "selector", "dimension": "s", "value": evil}) == set()
    assert matching({"type": "like", "dimension": "s", "pattern": evil}) == set()
    assert matching({"type": "selector", "dimension": 'x" OR TRUE OR "y', "value": None}) == set(range(N))
