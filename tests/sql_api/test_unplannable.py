"""Statements Druid's native planner finds no plan for (`strata.sql.unplannable`), and shapes
beside them it plans.

The refusals are Druid's: the statements are from its QA files (quidem-ut `qaArray`,
`qaUnnest`: `tests/sql_corpus/druid_qa/`, which expect an error), the message and body from its
SqlResourceTest (`SELECT dim1 FROM druid.foo ORDER BY dim1`: 400, DruidException `general`,
ADMIN, INVALID_INPUT, "Query could not be planned. A possible reason is [SQL query requires
ordering a table by non-time column [[dim1]], which is not supported.]") and its QueryHandler
("Unhandled Query Planning Failure, see broker logs for details": OPERATOR, UNSUPPORTED, 501).
The statements that must plan are ones those files show Druid answering, or shapes whose
datasource is not concrete (VALUES, a join, a subquery of its own), which Druid sorts by a stage
stacked on the scan (`DruidQuery.toScanAndSortQuery`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from strata.query.errors import PlanningFailed, QueryError, UnhandledPlanningFailure
from strata.sql.planner import parse
from strata.sql.statement import plan_statement
from strata.sql.unplannable import refuse_unplannable_shapes

TABLES: dict[str, dict[str, str]] = {
    "foo": {"__time": "LONG", "dim1": "STRING", "m1": "DOUBLE"},
    "test_array": {
        "__time": "LONG",
        "a_bool": "ARRAY<LONG>",
        "a_int": "ARRAY<LONG>",
        "a_nested": "COMPLEX<json>",
    },
    "test_unnest": {"__time": "LONG", "s_int": "LONG", "a_bool": "ARRAY<LONG>", "a_str": "ARRAY<STRING>"},
}


def columns(table: str) -> Mapping[str, str] | None:
    return TABLES.get(table)


def refusal(sql: str) -> QueryError | None:
    try:
        refuse_unplannable_shapes(parse(sql)[0], columns)
    except QueryError as e:
        return e
    return None


NON_TIME_ORDER = [
    "SELECT dim1 FROM druid.foo ORDER BY dim1",  # Druid's SqlResourceTest
    "SELECT a_bool c FROM test_array ORDER BY c ASC",  # qaArray sql_order_by.01.std
    "SELECT a_int c FROM test_array ORDER BY 1 DESC",
    "SELECT c FROM test_unnest, unnest(a_bool) AS u(c) ORDER BY c ASC",  # qaUnnest array_sql_order_by.01.std
    "SELECT s_int FROM test_unnest, unnest(a_bool) AS u(c) ORDER BY 1 DESC",
    "SELECT c FROM test_unnest, unnest(json_value(a_nested, '$[0]' RETURNING boolean array)) AS u(c) ORDER BY c",
    # the same rule, by Druid's planner: a LIMIT keeps a subquery's ORDER BY, a plain subquery merges
    "SELECT * FROM (SELECT dim1 FROM foo ORDER BY dim1 LIMIT 2)",
    "SELECT dim1 FROM (SELECT dim1, __time FROM foo WHERE m1 > 1) ORDER BY dim1 LIMIT 5",
    "WITH x AS (SELECT * FROM foo) SELECT dim1 FROM x ORDER BY dim1",
    "SELECT dim1 FROM foo ORDER BY __time, dim1",  # __time alone, or not at all
]


@pytest.mark.parametrize("sql", NON_TIME_ORDER)
def test_a_scan_of_a_table_is_ordered_by_time_alone(sql: str) -> None:
    error = refusal(sql)
    assert isinstance(error, PlanningFailed)
    assert str(error).startswith(
        "Query could not be planned. A possible reason is [SQL query requires ordering a table by non-time column"
    )


def test_the_refusal_names_the_columns_as_druid_does() -> None:
    assert str(refusal(NON_TIME_ORDER[0])) == (
        "Query could not be planned. A possible reason is [SQL query requires ordering a table by "
        "non-time column [[dim1]], which is not supported.]"
    )


UNNESTED_IN = [  # qaUnnest array_sql_subquery_with_where.02 and .04, mv_sql_subquery_with_where.02
    "SELECT c FROM test_unnest, unnest(a_bool) AS u(c) WHERE c IN (SELECT col FROM ( VALUES(1),(998)) AS t(col)) "
    "AND c NOT IN (SELECT col FROM ( VALUES(0),(999)) AS t(col))",
    "SELECT c FROM (SELECT * FROM test_unnest, unnest(a_bool) AS u(c) WHERE c IN "
    "(SELECT col FROM ( VALUES(1),(998)) AS t(col)))",
    "SELECT c FROM (SELECT * FROM test_unnest, unnest(a_bool) AS u(c)) WHERE c IN "
    "(SELECT col FROM ( VALUES(1),(998)) AS t(col))",
    "SELECT c FROM (SELECT * FROM test_unnest), unnest(a_str) AS u(c) WHERE s_int IN "
    "(SELECT col FROM ( VALUES(1),(996)) AS t(col)) AND c NOT IN (SELECT col FROM ( VALUES('S1')) AS t(col))",
]


@pytest.mark.parametrize("sql", UNNESTED_IN)
def test_in_a_subquery_on_an_unnested_column_does_not_plan(sql: str) -> None:
    error = refusal(sql)
    assert isinstance(error, UnhandledPlanningFailure)
    assert str(error) == "Unhandled Query Planning Failure, see broker logs for details"


UNNESTING_UNION = [  # qaUnnest array_sql_union_all.std 3, mv_sql_union_all.std 5
    "SELECT count(*) cnt FROM (SELECT * FROM test_unnest, unnest(a_bool) AS u(c) "
    "UNION ALL SELECT * FROM test_unnest, unnest(a_bool) AS u(c))",
    "SELECT count(*) cnt FROM (SELECT * FROM test_unnest, unnest(mv_to_array(c_mv_num)) AS u(c) "
    "UNION ALL SELECT * FROM test_unnest, unnest(mv_to_array(c_mv_num)) AS u(c))",
    # the same rule: any aggregation over that union needs a union datasource
    "SELECT c, count(*) FROM (SELECT c FROM test_unnest, unnest(a_str) AS u(c) "
    "UNION ALL SELECT dim1 FROM foo) GROUP BY c",
]


@pytest.mark.parametrize("sql", UNNESTING_UNION)
def test_an_aggregation_over_a_union_of_unnests_does_not_plan(sql: str) -> None:
    assert isinstance(refusal(sql), UnhandledPlanningFailure)


SIZED_WITHOUT_FROM = [  # qaAggFuncs array_agg_*_test003 and _test004: "is not supported"
    ("SELECT array_agg(111.1111111, 100000) AS col", "ARRAY_AGG($0, $1)"),
    ("SELECT array_agg(DISTINCT 'AAAAAAAAAA', 100000) AS col", "ARRAY_AGG(DISTINCT $0, $1)"),
    # string_agg_*_test001..004.01: a separator, and a size, reach STRING_AGG as columns too
    ("SELECT string_agg(111.1111111, '|') AS col", "STRING_AGG($0, $1)"),
    ("SELECT string_agg(DISTINCT 'AAAAAAAAAA', '|', 100000) AS col", "STRING_AGG(DISTINCT $0, $1, $2)"),
]


@pytest.mark.parametrize(("sql", "call"), SIZED_WITHOUT_FROM)
def test_array_agg_and_string_agg_take_their_sizes_and_separator_only_as_literals(
    sql: str, call: str
) -> None:
    assert str(refusal(sql)) == (
        f"Query could not be planned. A possible reason is [Aggregation [{call}] is not supported]"
    )


PLANNED = [
    # Druid's QA files answer these
    "SELECT c FROM (SELECT c FROM test_unnest, unnest(a_bool) AS u(c) ORDER BY c ASC)",  # sort dropped
    "SELECT c FROM (SELECT a_bool c FROM test_array ORDER BY 1 DESC)",
    "SELECT __time FROM test_unnest, unnest(a_bool) AS u(c) ORDER BY __time ASC",
    "SELECT __time FROM (SELECT __time FROM test_array ORDER BY __time ASC)",
    "SELECT c, count(*) cnt FROM test_unnest, unnest(a_bool) AS u(c) GROUP BY c ORDER BY c ASC",
    "SELECT c FROM test_unnest, unnest(a_bool) AS u(c) WHERE s_int IN (SELECT col FROM ( VALUES(1),(996)) AS t(col)) "
    "AND s_int NOT IN (SELECT col FROM ( VALUES(0),(997)) AS t(col))",
    "SELECT s_int, c FROM (SELECT * FROM test_unnest, unnest(a_bool) AS u(c) WHERE s_int IN (0, 1, 999) "
    "UNION ALL SELECT * FROM test_unnest, unnest(a_bool) AS u(c) WHERE s_int IN (2, 999))",
    # a union of table queries under an aggregation (Strata's differential tests run it)
    "SELECT k, SUM(c) AS total FROM (SELECT dim1 AS k, COUNT(*) AS c FROM foo GROUP BY 1 "
    "UNION ALL SELECT dim1, COUNT(*) FROM foo GROUP BY 1) AS u GROUP BY k",
    "SELECT array_agg(1111111111) AS col",  # qaAggFuncs array_agg_long_test001: no size, no FROM
    "SELECT array_agg(tab0s0, 100000) AS col FROM test_agg_funcs",  # a size over a table
    "SELECT string_agg(tab0s0, '|', 100000) AS col FROM test_agg_funcs",
    # a datasource that is not concrete, sorted by a stage above the scan
    "SELECT x FROM (VALUES (1), (2)) AS v(x) ORDER BY x DESC",
    "SELECT dim1 FROM (SELECT dim1 FROM foo LIMIT 10) ORDER BY dim1",
    "SELECT foo.dim1 FROM foo JOIN foo AS f2 ON foo.dim1 = f2.dim1 ORDER BY foo.dim1",
    "SELECT dim1 FROM foo WHERE dim1 IN (SELECT dim1 FROM foo WHERE m1 > 1) ORDER BY dim1",
    "SELECT c FROM test_unnest, unnest(a_bool) AS u(c) WHERE s_int = 1 ORDER BY c",  # a filtered datasource
    "SELECT c FROM (SELECT s_int + 1 AS s, a_bool FROM test_unnest), unnest(a_bool) AS u(c) ORDER BY c",
    # not a scan, or not a sort Druid keeps
    "SELECT DISTINCT dim1 FROM foo ORDER BY dim1",
    "SELECT dim1, ROW_NUMBER() OVER (ORDER BY m1) AS r FROM foo ORDER BY dim1",
    "SELECT * FROM sys.segments ORDER BY size",
    "SELECT __time AS t, dim1 FROM foo ORDER BY t DESC LIMIT 3",
    "SELECT dim1 FROM foo ORDER BY 'constant'",
    "SELECT dim1 FROM foo ORDER BY dim1 LIMIT 0",  # no rows: Calcite prunes it before Druid plans
    # an UNNEST alias naming a table column its argument does not read (array_sql_col_general.all line 10)
    "SELECT s_int0 FROM (SELECT * FROM test_unnest, unnest(a_bool) AS u(s_int))",
]


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM test_unnest, unnest(a_str) AS u(a_str)",  # qaUnnest array_sql_col_general.all line 44
        "SELECT * FROM test_unnest, unnest(mv_to_array(a_str)) AS u(a_str)",  # mv_sql_col_general.all line 65
    ],
)
def test_an_unnest_argument_named_as_its_own_alias_is_ambiguous(sql: str) -> None:
    refused = refusal(sql)
    assert refused is not None and "Column 'a_str' is ambiguous" in str(refused)
    assert refused.status == 400


def test_an_array_constructor_without_one_element_type_is_refused() -> None:
    # qaArray ops_funcs_array_funcs.01.all line 80
    refused = refusal("SELECT ARRAY[] AS col FROM test_array")
    assert refused is not None and "Require at least 1 argument" in str(refused)
    assert refusal("SELECT ARRAY[1] AS col FROM test_array") is None
    # line 100: a BOOLEAN beside numbers and strings; line 112: their strings are one type
    mixed = refusal("SELECT ARRAY[TRUE, 1, 0.1, 'S1', NULL] AS col FROM test_array")
    assert mixed is not None and "Parameters must be of the same type" in str(mixed)
    assert refusal("SELECT ARRAY['true', '1', '0.1', 'S1', 'null'] AS col FROM test_array") is None
    assert refusal("SELECT ARRAY[TRUE, FALSE, NULL] AS col FROM test_array") is None


@pytest.mark.parametrize("sql", PLANNED)
def test_shapes_druid_plans_are_left_to_plan(sql: str) -> None:
    assert refusal(sql) is None


class _Catalog:
    def tables(self) -> Sequence[str]:
        return list(TABLES)

    def columns(self, table: str) -> Mapping[str, str] | None:
        return columns(table)

    def segments(self) -> list[dict[str, Any]]:
        return []

    def servers(self) -> list[dict[str, Any]]:
        return []


@pytest.mark.parametrize(
    ("sql", "status", "body"),
    [
        (NON_TIME_ORDER[0], 400, {"errorCode": "general", "persona": "ADMIN", "category": "INVALID_INPUT"}),
        (UNNESTED_IN[0], 501, {"errorCode": "general", "persona": "OPERATOR", "category": "UNSUPPORTED"}),
    ],
)
def test_the_statement_is_refused_with_druids_body_not_answered_on_the_broker(
    sql: str, status: int, body: dict[str, str]
) -> None:
    with pytest.raises(QueryError) as caught:
        plan_statement(sql, _Catalog(), {})
    assert caught.value.status == status
    assert body.items() <= caught.value.to_body().items()
    assert caught.value.to_body()["errorClass"] == "org.apache.druid.error.DruidException"
