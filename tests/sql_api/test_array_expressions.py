"""SQL's array and multi-value functions as the native expressions the planner writes, evaluated
over one row; the answers are Druid's, from its QA files (`tests/sql_corpus/druid_qa/`)."""

from __future__ import annotations

import sqlglot

from strata.sql.dialect import DIALECT
from strata.sql.expressions import ExpressionWriter
from tests.query.test_expression_arrays import evaluate


def _native(sql: str) -> str:
    select = sqlglot.parse_one(f"SELECT {sql}", dialect=DIALECT)
    assert isinstance(select, sqlglot.exp.Select)
    return ExpressionWriter(0).write(select.expressions[0])


def test_mv_contains_of_a_null_array_is_false_where_array_contains_is_null() -> None:
    # qaArray/ops_funcs_mv_funcs.03.std.iq cases 44 and 45 (MV_CONTAINS of a null VARCHAR ARRAY is
    # false) beside ops_funcs_array_funcs.03.all.iq line 5 (ARRAY_CONTAINS of one is null)
    row = {"a": ("VARCHAR[]", None), "b": ("VARCHAR[]", ["x", None])}
    assert evaluate(_native("MV_CONTAINS(a, 'x')"), row) == 0
    assert evaluate(_native("ARRAY_CONTAINS(a, 'x')"), row) is None
    assert evaluate(_native("MV_CONTAINS(b, 'x')"), row) == 1
    assert evaluate(_native("MV_CONTAINS(b, 'y')"), row) == 0


def test_multi_value_results_of_no_values() -> None:
    # qaArray/ops_funcs_array_funcs.07.std.iq line 384 and ops_funcs_mv_funcs.06.std.iq line 510:
    # ARRAY_TO_MV and MV_CONCAT of an empty array are [] (the empty array, which the scan prints so)
    row = {"a_empty": ("BIGINT[]", []), "tags": ("VARCHAR[]", ["t1", "t2"])}
    assert evaluate(_native("ARRAY_TO_MV(a_empty)"), row) == []
    assert evaluate(_native("MV_CONCAT(a_empty, a_empty)"), row) == []
    # MV_FILTER_ONLY of an expression keeps nothing as Druid's filter(): the empty array; of a
    # column with a literal list, Druid's ListFilteredVirtualColumn: null (a row of no value)
    assert evaluate(_native("MV_FILTER_ONLY(MV_CONCAT(tags, tags), ARRAY['x'])"), row) == []
    assert evaluate(_native("MV_FILTER_ONLY(tags, ARRAY['x'])"), row) is None
    assert evaluate(_native("MV_FILTER_NONE(tags, ARRAY['t1', 't2'])"), row) is None
    assert evaluate(_native("MV_FILTER_ONLY(tags, ARRAY['t2'])"), row) == ["t2"]
