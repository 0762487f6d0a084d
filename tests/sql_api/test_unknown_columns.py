"""Columns Druid's validator does not find, planned without a cluster: in an UNNEST's argument (a
select item's alias is none) and as a grouping key (an unnested column named like the table's is not
renamed `s_int0`). The statements are qaUnnest's `mv_sql_col_general.all.iq` and
`array_sql_col_general.all.iq`, which expect "Column '...' not found in any table"."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from strata.query.errors import InvalidInput
from strata.sql.statement import plan_statement

TABLES = {
    "test_unnest": {
        "__time": "LONG",
        "c_long": "LONG",
        "c_mv_complex": "MULTI_VALUE_STRING",
        "s_int": "LONG",
        "a_int": "ARRAY<LONG>",
    }
}


class _Catalog:
    def tables(self) -> Sequence[str]:
        return list(TABLES)

    def columns(self, table: str) -> Mapping[str, str] | None:
        return TABLES.get(table)

    def segments(self) -> list[dict[str, Any]]:
        return []

    def servers(self) -> list[dict[str, Any]]:
        return []


@pytest.mark.parametrize(
    ("sql", "column"),
    [
        ("SELECT c FROM test_unnest, unnest(mv_to_array(doesnt_exist)) AS u(c)", "doesnt_exist"),
        ("SELECT c FROM test_unnest, unnest(mv_to_array(doesnt_exist)) AS u(c) GROUP BY c", "doesnt_exist"),
        (
            "SELECT c, c_mv_complex AS new_col FROM test_unnest, unnest(mv_to_array(new_col)) AS u(c)",
            "new_col",
        ),
    ],
)
def test_an_unnest_of_an_unknown_column_is_refused(sql: str, column: str) -> None:
    with pytest.raises(InvalidInput, match=f"Column '{column}' not found in any table"):
        plan_statement(sql, _Catalog(), {})


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT c, count(*) FROM test_unnest, unnest(mv_to_array(c_mv_complex)) AS u(c) GROUP BY c",
        "SELECT s_int, count(*) FROM test_unnest GROUP BY s_int",
        "SELECT x, count(*) FROM (SELECT s_int AS x FROM test_unnest) GROUP BY x",
    ],
)
def test_the_tables_and_the_unnested_columns_plan(sql: str) -> None:
    assert len(plan_statement(sql, _Catalog(), {}).names) == 2
