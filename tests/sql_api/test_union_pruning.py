"""UNION ALL subqueries lose the columns their outer SELECT never names, as Druid's planner leaves
them out of the union's native queries (Druid's `union_datasource.iq` case 3, in the SqlQuidemTest
corpus, is the end-to-end check: `foo.dim3` STRING beside `foo2.dim3` LONG, never read). Pure
functions over sqlglot trees."""

from __future__ import annotations

import pytest
import sqlglot

from strata.sql.subqueries import prune_union_subqueries

UNION = "(SELECT dim2, dim3 FROM foo UNION ALL SELECT dim2, dim3 FROM foo2)"


def pruned(sql: str) -> str:
    return prune_union_subqueries(sqlglot.parse_one(sql)).sql()


def test_a_column_the_outer_query_never_names_leaves_every_branch() -> None:
    got = pruned(f"SELECT dim2, COUNT(*) FROM {UNION} WHERE dim2 = 'a' GROUP BY 1")
    assert "dim3" not in got
    assert got.count("SELECT dim2 FROM") == 2


def test_a_column_named_anywhere_in_the_outer_query_stays() -> None:
    for outer in ("SELECT dim2 FROM {u} WHERE dim3 = 'x'", "SELECT dim2 FROM {u} ORDER BY dim3",
                  "SELECT dim2, MAX(dim3) FROM {u} GROUP BY 1"):  # fmt: skip
        assert pruned(outer.format(u=UNION)).count("dim3") >= 3


@pytest.mark.parametrize(
    "sql",
    [
        f"SELECT * FROM {UNION}",  # every column is read
        "SELECT dim2 FROM (SELECT dim2, dim3 FROM foo UNION ALL SELECT DISTINCT dim2, dim3 FROM foo2)",
        "SELECT dim2 FROM (SELECT dim2, dim3 FROM foo UNION ALL SELECT dim2, dim3 FROM foo2 GROUP BY 1, 2)",
        "SELECT dim2 FROM (SELECT dim2, dim3 FROM foo UNION SELECT dim2, dim3 FROM foo2)",  # DISTINCT union
        "SELECT dim2 FROM (SELECT dim2, dim3 FROM foo UNION ALL SELECT * FROM foo2)",
    ],
)
def test_branches_whose_rows_depend_on_every_column_are_left_alone(sql: str) -> None:
    assert pruned(sql) == sqlglot.parse_one(sql).sql()


def test_a_statement_without_a_union_is_the_same_tree() -> None:
    tree = sqlglot.parse_one("SELECT dim2 FROM (SELECT dim2, dim3 FROM foo)")
    assert prune_union_subqueries(tree) is tree
