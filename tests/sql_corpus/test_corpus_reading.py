"""The corpus's pure parts: reading quidem files, normalising printed values, ordering, skips."""

from __future__ import annotations

from collections import Counter

import pytest

from tests.sql_corpus.compare import compare, outer_order_by
from tests.sql_corpus.qa import folder_table, rates, variant_categories, variant_group
from tests.sql_corpus.quidem import Case, Table, parse_cases
from tests.sql_corpus.runner import Outcome
from tests.sql_corpus.skips import skip_reason

FILE = """!set outputformat mysql
!use druidtest:///
# a comment
select dim1, 'a|b' from foo order by 1;
+------+--------+
| dim1 | EXPR$1 |
+------+--------+
|      | a|b    |
| 1    | a|b    |
+------+--------+
(2 rows)

!ok
!set useApproximateCountDistinct false
select x
from nowhere;
{ "queryType" : "scan" }
!nativePlan
+---+
| x |
+---+
+---+
(0 rows)

!ok
select 1 +;
Incorrect syntax
!error
"""


def test_statements_settings_tables_and_errors_are_read() -> None:
    first, second, third = parse_cases(FILE, "f.iq")
    assert first.sql == "select dim1, 'a|b' from foo order by 1"
    assert first.expected == Table(("dim1", "EXPR$1"), (("", "a|b"), ("1", "a|b")))
    assert first.settings == {"outputformat": "mysql"} and first.use == "druidtest:///"
    # the table after a statement's plan blocks belongs to that statement
    assert second.sql == "select x\nfrom nowhere" and second.expected == Table(("x",), ())
    assert second.settings["useApproximateCountDistinct"] == "false"
    assert (third.kind, third.error_text, third.case_id) == ("error", "Incorrect syntax", "f.iq:3")


def test_printing_is_normalised_not_values() -> None:
    want = Table(
        ("t", "d", "n", "f", "b", "s"),
        (("2015-09-12 00:00:00.000", "2000-01-01", "3.0", "0.1", "true", ""),),
    )
    got = [["2015-09-12T00:00:00.000Z", "2000-01-01T00:00:00.000Z", 3, 0.10000000149011612, True, None]]
    assert compare("select 1", want, list(want.columns), got) is None
    assert compare("select 1", want, list(want.columns), [[*got[0][:4], 1, None]]) is not None
    assert compare("select 1", want, ["t", "d", "n", "f", "b", "EXPR$5"], got) is not None


def test_timestamp_array_elements_are_their_epoch_milliseconds() -> None:
    """quidem's `[2020-01-01 01:01:01]` for a TIMESTAMP ARRAY is the SQL API's epoch milliseconds
    (the `.msq` files print the same statement's answer as `[1577840461000]`); a string element
    printed alike on both sides stays equal, another instant or a plain number does not."""
    want = Table(("col",), (("[2020-01-01 01:01:01, 2020-02-01 01:01:01.5]",),))
    assert compare("select 1", want, ["col"], [[[1577840461000, 1580518861500]]]) is None
    assert compare("select 1", want, ["col"], [[["2020-01-01 01:01:01", "2020-02-01T01:01:01.500Z"]]]) is None
    assert compare("select 1", want, ["col"], [[[1577840461001, 1580518861500]]]) is not None
    assert compare("select 1", want, ["col"], [[[1577840461, 1580518861]]]) is not None


def test_order_matters_only_under_an_outer_order_by_and_only_between_different_keys() -> None:
    want = Table(("k", "v"), (("a", "1"), ("a", "2"), ("b", "3")))
    swapped_ties = [["a", 2], ["a", 1], ["b", 3]]
    reversed_keys = [["b", 3], ["a", 1], ["a", 2]]
    assert compare("select k, v from t order by k", want, ["k", "v"], swapped_ties) is None
    assert compare("select k, v from t order by k", want, ["k", "v"], reversed_keys) is not None
    assert compare("select k, v from (select * from t order by k) x", want, ["k", "v"], reversed_keys) is None
    assert outer_order_by("select a from t where s = 'order by x' order by 2 desc limit 3") == ["2 desc"]


def test_skips_name_their_reason() -> None:
    def case(sql: str) -> Case:
        return Case("f.iq", 1, 1, sql, "ok", Table((), ()), "")

    assert skip_reason(case("select dim1 from foo")) is None
    assert skip_reason(case("select count(*) from (select * from foo union all select * from foo)")) is None
    assert skip_reason(case("select dim3 from druid.foo")) is None  # a multi-value string, rebuilt
    assert "unique_dim1" in str(skip_reason(case("select unique_dim1 from druid.foo")))
    assert "unique_dim1" in str(skip_reason(case("select * from numfoo")))
    assert skip_reason(case("select k from lookup.lookyloo")) is None  # lookups run now
    assert skip_reason(case("select lookup(dim1, 'lookyloo') from foo")) is None
    assert "kttm" in str(skip_reason(case("select 1 from kttm")))
    assert "INSERT" in str(skip_reason(case("insert into w select * from foo")))
    assert skip_reason(case("select extract(year from __time) from wikipedia")) is None


def test_qa_rates_are_split_by_folder_and_by_engine_variant() -> None:
    def outcome(file: str, passed: bool) -> Outcome:
        case = Case(file, 1, 1, "select 1", "ok", Table((), ()), "")
        return Outcome(case, "passed") if passed else Outcome(case, "failed", "wrong answer: values")

    outcomes = [
        outcome("qaArray/sql_a.01.all.iq", True),
        outcome("qaArray/sql_b.std.iq", False),
        outcome("qaArray/sql_b.msq.iq", False),
        outcome("qaUnnest/mv_c.dart.iq", True),
    ]
    assert [variant_group(o.case) for o in outcomes] == [".all/.std", ".all/.std", ".msq/.dart", ".msq/.dart"]
    assert rates(outcomes) == {
        "qaAggFuncs": {"statements": 0, "passed": 0},
        "qaArray": {"statements": 3, "passed": 1},
        "qaUnnest": {"statements": 1, "passed": 1},
        ".all/.std": {"statements": 2, "passed": 1},
        ".msq/.dart": {"statements": 2, "passed": 1},
    }
    assert variant_categories(outcomes) == [
        ("wrong answer: values", Counter({".all/.std": 1, ".msq/.dart": 1}))
    ]
    table = folder_table(outcomes).splitlines()
    assert table[-3].split() == ["TOTAL", ".all/.std", "2", "1", "1", "50.0%"]
    assert table[-1].split() == ["TOTAL", "(all)", "4", "2", "2", "50.0%"]
    with pytest.raises(ValueError, match=r"not a \.all"):
        variant_group(Case("qaArray/x.iq", 1, 1, "select 1", "ok", None, ""))
