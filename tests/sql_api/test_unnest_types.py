"""The SQL types and names of UNNEST's output columns (and of the columns a `*` lists), as Druid's
planner gives them: the statements and expected answers are Druid's, from its QA files
(`tests/sql_corpus/druid_qa/qaUnnest/`), or Calcite's rules where those say nothing."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from sqlglot import exp

from strata.sql.composed import ComposedPlan
from strata.sql.plan import SqlPlan
from strata.sql.statement import plan_statement

# qatests/qaUnnest/array: test_unnest's columns as Druid's schema discovery types them (a part)
COLUMNS = {
    "__time": "LONG", "s_int": "LONG", "a_bool": "ARRAY<LONG>", "a_int": "ARRAY<LONG>", "a_nested": "COMPLEX<json>",
}  # fmt: skip


class _Catalog:
    def tables(self) -> Sequence[str]:
        return ["test_unnest"]

    def columns(self, table: str) -> Mapping[str, str] | None:
        return COLUMNS if table == "test_unnest" else None

    def segments(self) -> list[dict[str, Any]]:
        return []

    def servers(self) -> list[dict[str, Any]]:
        return []


def _plan(sql: str) -> SqlPlan:
    plan = plan_statement(sql, _Catalog(), {}).plan
    assert isinstance(plan, SqlPlan)
    return plan


def test_a_boolean_arrays_elements_are_booleans() -> None:
    # array_sql_col_datatype_array.std.iq line 549: the elements of a BOOLEAN ARRAY print
    # false/true (the native values are 1/0)
    plan = _plan(
        "SELECT c FROM test_unnest, unnest(json_value(a_nested, '$[0]' RETURNING boolean array)) AS u(c)"
    )
    assert [o.sql_type for o in plan.outputs] == ["BOOLEAN"]
    assert plan.native is not None
    scan = [{"columns": plan.native["columns"], "events": [[1], [0], [None]]}]
    assert plan.rows(scan) == [[True], [False], [None]]
    # array_sql_group_by.01.std.iq line 334: grouped by the element, and beside a count
    grouped = _plan(
        "SELECT c, count(*) cnt FROM test_unnest, "
        "unnest(json_value(a_nested, '$[0]' RETURNING boolean array)) AS u(c) GROUP BY c"
    )
    assert [o.sql_type for o in grouped.outputs] == ["BOOLEAN", "BIGINT"]


def test_an_element_read_from_a_boolean_array_is_a_boolean() -> None:
    # qaArray/ops_funcs_array_funcs.01.all.iq line 36 and .02 line 10: ARRAY_OFFSET / ARRAY_ORDINAL
    # of a BOOLEAN ARRAY print true/false
    for function, index in (("array_offset", 0), ("array_ordinal", 1)):
        plan = _plan(
            f"SELECT {function}(json_value(a_nested, '$[0]' RETURNING boolean array), {index}) AS col"
            " FROM test_unnest"
        )
        assert [o.sql_type for o in plan.outputs] == ["BOOLEAN"]
        assert plan.native is not None
        scan = [{"columns": plan.native["columns"], "events": [[1], [0], [None]]}]
        assert plan.rows(scan) == [[True], [False], [None]]
    # of a LONG ARRAY they stay numbers
    plan = _plan("SELECT array_offset(a_bool, 0) AS col FROM test_unnest")
    assert [o.sql_type for o in plan.outputs] == ["BIGINT"]


def test_a_long_arrays_elements_stay_numbers() -> None:
    # array_sql_col_datatype_array.std.iq: a_bool is stored as ARRAY<LONG>, its elements print 1/0
    plan = _plan("SELECT c FROM test_unnest, unnest(a_bool) AS u(c)")
    assert [o.sql_type for o in plan.outputs] == ["BIGINT"]


def test_an_exact_distinct_count_reads_the_unnest_in_its_grouping_stage() -> None:
    # qaUnnest/array_sql_agg_funcs.01.all.iq case 14: COUNT(DISTINCT s_int) over the unnested rows
    # with useApproximateCountDistinct false; the outer statement read UNNEST(a_bool) from the stage
    # ("Referenced column not found")
    plan = plan_statement(
        "SELECT count(DISTINCT s_int) AS col FROM test_unnest, unnest(a_bool) AS u(c) WHERE s_int IN (0, 1, 2)",
        _Catalog(),
        {"useApproximateCountDistinct": False},
    ).plan
    assert isinstance(plan, ComposedPlan)
    assert plan.outer.find(exp.Unnest) is None
    (stage,) = plan.stages
    assert isinstance(stage.plan, SqlPlan) and stage.plan.native is not None
    assert stage.plan.native["dataSource"]["type"] == "unnest"


def test_a_star_names_an_unnested_column_apart_from_the_tables_own() -> None:
    # array_sql_col_general.all.iq line 127: Calcite's expansion of `*` names a column apart from
    # the select items before it (`SqlValidatorUtil.uniquify`: s_int, then s_int0, s_int1, ...), so
    # the subquery's unnested `s_int` is its outer query's `s_int0`
    plan = _plan("SELECT * FROM test_unnest, unnest(a_int) AS u(s_int)")
    assert [o.name for o in plan.outputs] == [*COLUMNS, "s_int0"]
    assert [o.source for o in plan.outputs][-2:] == ["a_nested", "j0.unnest"]
    plan = _plan("SELECT s_int, * FROM test_unnest, unnest(a_int) AS u(c)")
    assert [o.name for o in plan.outputs] == ["s_int", "__time", "s_int0", "a_bool", "a_int", "a_nested", "c"]
    composed = plan_statement(
        "SELECT s_int0 FROM (SELECT * FROM test_unnest, unnest(a_int) AS u(s_int))", _Catalog(), {}
    ).plan
    assert isinstance(composed, ComposedPlan)
    (stage,) = composed.stages
    assert isinstance(stage.plan, SqlPlan)
    assert stage.plan.outputs[-1].name == "s_int0" and stage.plan.outputs[-1].source == "j0.unnest"


def test_a_star_over_a_plain_subquery_lists_the_subquerys_items() -> None:
    # Calcite expands the outer `*` to the subquery's columns, named apart as above (the table's
    # other columns are not the subquery's)
    plan = _plan("SELECT * FROM (SELECT s_int, s_int + 1 AS s_int FROM test_unnest)")
    assert [o.name for o in plan.outputs] == ["s_int", "s_int0"]
    plan = _plan("SELECT s_int AS x, * FROM (SELECT s_int AS x, a_int FROM test_unnest) WHERE x > 1")
    assert [o.name for o in plan.outputs] == ["x", "x0", "a_int"]
    plan = _plan("SELECT * FROM (SELECT * FROM test_unnest)")
    assert [o.name for o in plan.outputs] == list(COLUMNS)


def test_parentheses_around_the_first_joins_change_nothing() -> None:
    # array_sql_join.09.all.iq line 527: `(t1 CROSS JOIN UNNEST(..)) CROSS JOIN t2` is the join of
    # the three (joins associate to the left); it read `a_int` as a column of no table
    def planned(sql: str) -> str:
        plan = plan_statement(sql, _Catalog(), {}).plan
        assert isinstance(plan, ComposedPlan)
        stages = [
            json.dumps(s.plan.native, sort_keys=True) for s in plan.stages if isinstance(s.plan, SqlPlan)
        ]
        return re.sub(r"__stage\d+|\"queryId\": \"[^\"]*\"", "?", " ".join([plan.outer.sql(), *stages]))

    join = "{} CROSS JOIN test_unnest t2 WHERE t1.s_int IN (0, 1, 2) AND u.c = t2.s_int"
    grouped = planned(
        "SELECT t1.s_int, c FROM " + join.format("(test_unnest t1 CROSS JOIN unnest(a_int) AS u(c))")
    )
    assert grouped == planned(
        "SELECT t1.s_int, c FROM " + join.format("test_unnest t1 CROSS JOIN unnest(a_int) AS u(c)")
    )
