"""Random Druid SQL over multi-value, array and nested columns, each with DuckDB SQL over `raw`.

`raw` is tests.differential.mv_data's rows as Druid reads them (a multi-value row with no value
is the one value null) plus the nested paths as columns (mv_generator.oracle_connection). What
the DuckDB side encodes (Druid's `sql-multivalue-string-functions.md`, `sql-array-functions.md`,
`sql-json-functions.md`, `unnest.md`): MV_CONTAINS / ARRAY_CONTAINS hold every given value,
MV_OVERLAP / ARRAY_OVERLAP some; `=` on a multi-value string matches a row holding the value;
grouping on one counts the row under each value (no value: null); MV_FILTER_ONLY keeps the listed
values (none left: null); `CROSS JOIN UNNEST` gives a row per element of an array (none for
`null` or `[]`) and per value of a multi-value string (one null row for a row with no value).
"""

from __future__ import annotations

import random

from tests.differential.mv_data import KINDS
from tests.differential.sql_generator import SqlCase

PREDICATES = [
    ("MV_CONTAINS(tags, 'a')", "list_contains(tags, 'a')"),
    ("MV_CONTAINS(tags, ARRAY['a', 'b'])", "list_has_all(tags, ['a', 'b'])"),
    ("MV_OVERLAP(tags, ARRAY['c', 'e'])", "list_has_any(tags, ['c', 'e'])"),
    ("MV_OVERLAP(labels, ARRAY['x'])", "list_has_any(labels, ['x'])"),
    ("tags = 'd'", "list_contains(tags, 'd')"),
    ("labels IN ('y', 'z')", "list_has_any(labels, ['y', 'z'])"),
    ("ARRAY_CONTAINS(nums, 3)", "list_contains(nums, 3)"),
    ("ARRAY_CONTAINS(nums, ARRAY[1, 2])", "list_has_all(nums, [1, 2])"),
    ("ARRAY_OVERLAP(words, ARRAY['p', 'q'])", "list_has_any(words, ['p', 'q'])"),
    ("ARRAY_CONTAINS(words, 's')", "list_contains(words, 's')"),
    ("JSON_VALUE(attrs, '$.kind') = 'click'", "v_kind = 'click'"),
    ("JSON_VALUE(attrs, '$.user.id' RETURNING BIGINT) > 3", "v_uid > 3"),
    ("JSON_VALUE(attrs, '$.user.name') IS NULL", "v_name IS NULL"),
    ("JSON_VALUE(attrs, '$.user.geo.city') IN ('Oslo', 'Lima')", "v_city IN ('Oslo', 'Lima')"),
]
# (Druid SQL, DuckDB SQL, explode: the DuckDB SQL is a list counted once per element)
GROUPINGS = [
    ("tags", "tags", True),
    ("labels", "labels", True),
    ("MV_FILTER_ONLY(tags, ARRAY['a', 'b'])",
     "(CASE WHEN len(list_filter(tags, lambda x: x IN ('a', 'b'))) = 0 THEN [NULL]::VARCHAR[] "
     "ELSE list_filter(tags, lambda x: x IN ('a', 'b')) END)", True),
    ("JSON_VALUE(attrs, '$.kind')", "v_kind", False),
    ("JSON_VALUE(attrs, '$.user.name')", "v_name", False),
    ("JSON_VALUE(attrs, '$.user.id' RETURNING BIGINT)", "v_uid", False),
    # an ARRAY answered as its JSON text (Druid's sqlStringifyArrays, on by default)
    ("nums", "to_json(nums)::VARCHAR", False),
    ("words", "to_json(words)::VARCHAR", False),
    ("page", "page", False),
]  # fmt: skip
UNNESTED = [
    ("nums", "nums", ["u.v > 2", "u.v IS NULL", "u.v IN (0, 5)"]),
    ("words", "words", ["u.v = 'p'", "u.v IS NULL", "u.v <> 'q'"]),
    ("MV_TO_ARRAY(tags)", "tags", ["u.v = 'a'", "u.v IS NULL", "u.v IN ('b', 'c')"]),
]
AGGREGATES = [("COUNT(*)", "count(*)"), ("SUM(added)", "sum(added)"), ("MAX(delta)", "max(delta)")]


def _where(rnd: random.Random) -> tuple[str, str]:
    if rnd.random() < 0.3:
        return "", ""
    picked = rnd.sample(PREDICATES, rnd.choice([1, 1, 2]))
    joiner = rnd.choice([" AND ", " OR "])
    return (" WHERE " + joiner.join(f"({d})" for d, _ in picked),
            " WHERE " + joiner.join(f"({q})" for _, q in picked))  # fmt: skip


def _aggregates(rnd: random.Random) -> tuple[str, str]:
    aggs = rnd.sample(AGGREGATES, rnd.randint(1, 2))
    return (", ".join(f"{d} AS a{i}" for i, (d, _) in enumerate(aggs)),
            ", ".join(f"{q} AS a{i}" for i, (_, q) in enumerate(aggs)))  # fmt: skip


def _filtered(rnd: random.Random, table: str) -> SqlCase:
    agg_d, agg_q = _aggregates(rnd)
    where_d, where_q = _where(rnd)
    return SqlCase(f"SELECT {agg_d} FROM {table}{where_d}", f"SELECT {agg_q} FROM raw{where_q}", "mvFilter")


def _grouped(rnd: random.Random, table: str) -> SqlCase:
    dim_d, dim_q, explode = rnd.choice(GROUPINGS)
    agg_d, agg_q = _aggregates(rnd)
    where_d, where_q = _where(rnd)
    source = f"(SELECT *, unnest({dim_q}) AS d FROM raw)" if explode else f"(SELECT *, {dim_q} AS d FROM raw)"
    return SqlCase(f"SELECT {dim_d} AS d, {agg_d} FROM {table}{where_d} GROUP BY 1",
                   f"SELECT d, {agg_q} FROM {source}{where_q} GROUP BY 1", "mvGroupBy")  # fmt: skip


def _unnest(rnd: random.Random, table: str) -> SqlCase:
    array_d, array_q, filters = rnd.choice(UNNESTED)
    agg_d, agg_q = _aggregates(rnd)
    where_d, where_q = _where(rnd)
    if rnd.random() < 0.5:
        extra = rnd.choice(filters)
        where_d += (" AND " if where_d else " WHERE ") + extra
        where_q += (" AND " if where_q else " WHERE ") + extra
    druid = f"SELECT u.v AS d, {agg_d} FROM {table} CROSS JOIN UNNEST({array_d}) AS u(v){where_d} GROUP BY 1"
    duck = f"SELECT u.v AS d, {agg_q} FROM raw, unnest(raw.{array_q}) AS u(v){where_q} GROUP BY 1"
    return SqlCase(druid, duck, "unnest")


def _nested_grouped(rnd: random.Random, table: str) -> SqlCase:
    """Two groupings: a JSON path by a multi-value string (every pair)."""
    kind = rnd.choice(KINDS)
    druid = (f"SELECT JSON_VALUE(attrs, '$.user.name') AS n, labels AS l, COUNT(*) AS c FROM {table} "
             f"WHERE JSON_VALUE(attrs, '$.kind') <> '{kind}' GROUP BY 1, 2")  # fmt: skip
    duck = (f"SELECT v_name AS n, l, count(*) AS c FROM (SELECT *, unnest(labels) AS l FROM raw) "
            f"WHERE v_kind <> '{kind}' GROUP BY 1, 2")  # fmt: skip
    return SqlCase(druid, duck, "mvGroupBy")


SHAPES = [(_filtered, 3), (_grouped, 4), (_unnest, 3), (_nested_grouped, 1)]


def generate_sql(rnd: random.Random, table: str) -> SqlCase:
    makers = [m for m, weight in SHAPES for _ in range(weight)]
    case = rnd.choice(makers)(rnd, table)
    case.context.setdefault("useApproximateTopN", False)
    return case
