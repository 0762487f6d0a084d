"""Random Druid SQL over the wikipedia sample, each with the same question in DuckDB SQL over `raw`.

Shapes: grouped aggregates (plain and expression dimensions, time floors, filtered and expression
aggregates, HAVING, ORDER BY with LIMIT), global aggregates, selections, aggregating subqueries,
UNION ALL and exact COUNT(DISTINCT). Filters come from the native generator's null-heavy predicates
and time ranges. Druid orders nulls first ascending and last descending; the DuckDB side says so.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from tests.differential.generator import gen_filter

HOUR_FMT = "%Y-%m-%dT%H:%M:%S.000Z"


@dataclass
class SqlCase:
    druid: str
    duck: str
    kind: str
    ordered: bool = False  # compare rows in order (ORDER BY over every output)
    context: dict[str, Any] = field(default_factory=dict)


# (Druid SQL, DuckDB SQL) for grouping keys
DIMENSIONS = [
    ("channel", "channel"),
    ("countryName", "countryName"),
    ("cityName", "cityName"),
    ("regionIsoCode", "regionIsoCode"),
    ("namespace", "namespace"),
    ("isRobot", "isRobot"),
    ("UPPER(namespace)", "upper(namespace)"),
    ("SUBSTRING(channel, 2, 2)", "substring(channel, 2, 2)"),
    ("COALESCE(cityName, 'none')", "coalesce(cityName, 'none')"),
    ("CASE WHEN added > 50 THEN 'big' WHEN added > 0 THEN 'some' ELSE 'none' END",
     "CASE WHEN added > 50 THEN 'big' WHEN added > 0 THEN 'some' ELSE 'none' END"),
    ("CHAR_LENGTH(countryIsoCode)", "length(countryIsoCode)"),
    ("FLOOR(__time TO HOUR)", f"strftime(date_trunc('hour', t), '{HOUR_FMT}')"),
    ("TIME_FLOOR(__time, 'PT6H')", f"strftime(time_bucket(INTERVAL 6 HOUR, t), '{HOUR_FMT}')"),
    ("TIME_EXTRACT(__time, 'HOUR')", "hour(t)"),
]  # fmt: skip
AGGREGATES = [
    ("COUNT(*)", "count(*)"),
    ("SUM(added)", "sum(added)"),
    ("MIN(delta)", "min(delta)"),
    ("MAX(delta)", "max(delta)"),
    ("COUNT(cityName)", "count(cityName)"),
    ("SUM(added - deleted)", "sum(added - deleted)"),
    (
        "SUM(CASE WHEN isRobot = 'true' THEN 1 ELSE 0 END)",
        "sum(CASE WHEN isRobot = 'true' THEN 1 ELSE 0 END)",
    ),
    ("COUNT(*) FILTER (WHERE namespace = 'Main')", "count(*) FILTER (WHERE namespace = 'Main')"),
    ("MAX(CHAR_LENGTH(page))", "max(length(page))"),
    ("AVG(added)", "avg(added)"),
    ("SUM(ABS(delta))", "sum(abs(delta))"),
]
TIME_RANGES = [
    ("", ""),
    ("__time >= TIMESTAMP '2015-09-12 06:00:00' AND __time < TIMESTAMP '2015-09-12 18:30:00'",
     "t >= TIMESTAMP '2015-09-12 06:00:00' AND t < TIMESTAMP '2015-09-12 18:30:00'"),
    ("__time BETWEEN TIMESTAMP '2015-09-12 01:10:00' AND TIMESTAMP '2015-09-12 02:20:00'",
     "t BETWEEN TIMESTAMP '2015-09-12 01:10:00' AND TIMESTAMP '2015-09-12 02:20:00'"),
    ("TIME_IN_INTERVAL(__time, '2015-09-12T20:00:00Z/PT3H')",
     "t >= TIMESTAMP '2015-09-12 20:00:00' AND t < TIMESTAMP '2015-09-12 23:00:00'"),
]  # fmt: skip


def _where(rnd: random.Random) -> tuple[str, str]:
    parts_d, parts_q = [], []
    time_d, time_q = rnd.choice(TIME_RANGES)
    if time_d:
        parts_d.append(time_d)
        parts_q.append(time_q)
    if rnd.random() < 0.7:
        _, predicate = gen_filter(rnd)
        parts_d.append(predicate)
        parts_q.append(predicate)
    if not parts_d:
        return "", ""
    return " WHERE " + " AND ".join(parts_d), " WHERE " + " AND ".join(parts_q)


def _grouped(rnd: random.Random, table: str) -> SqlCase:
    dims = rnd.sample(DIMENSIONS, rnd.randint(1, 2))
    aggs = rnd.sample(AGGREGATES, rnd.randint(1, 3))
    where_d, where_q = _where(rnd)
    select_d = [f"{d} AS d{i}" for i, (d, _) in enumerate(dims)] + [
        f"{a} AS a{i}" for i, (a, _) in enumerate(aggs)
    ]
    select_q = [f"{q} AS d{i}" for i, (_, q) in enumerate(dims)] + [
        f"{q} AS a{i}" for i, (_, q) in enumerate(aggs)
    ]
    group = ", ".join(str(i + 1) for i in range(len(dims)))
    druid = f"SELECT {', '.join(select_d)} FROM {table}{where_d} GROUP BY {group}"
    duck = f"SELECT {', '.join(select_q)} FROM raw{where_q} GROUP BY {group}"
    if rnd.random() < 0.25:
        k = rnd.choice([1, 5, 20])
        druid += f" HAVING COUNT(*) > {k}"
        duck += f" HAVING count(*) > {k}"
    ordered = rnd.random() < 0.4
    if ordered:
        limit = rnd.choice([1, 3, 10, 50])
        direction = rnd.choice(["DESC", "ASC"])
        nulls = "NULLS LAST" if direction == "DESC" else "NULLS FIRST"
        ties = "".join(f", d{i}" for i in range(len(dims)))
        ties_q = "".join(f", d{i} ASC NULLS FIRST" for i in range(len(dims)))
        druid += f" ORDER BY a0 {direction}{ties} LIMIT {limit}"
        duck += f" ORDER BY a0 {direction} {nulls}{ties_q} LIMIT {limit}"
    return SqlCase(druid, duck, "groupBy", ordered)


def _global(rnd: random.Random, table: str) -> SqlCase:
    aggs = rnd.sample(AGGREGATES, rnd.randint(1, 4))
    where_d, where_q = _where(rnd)
    druid = f"SELECT {', '.join(f'{a} AS a{i}' for i, (a, _) in enumerate(aggs))} FROM {table}{where_d}"
    duck = f"SELECT {', '.join(f'{q} AS a{i}' for i, (_, q) in enumerate(aggs))} FROM raw{where_q}"
    return SqlCase(druid, duck, "timeseries")


def _selection(rnd: random.Random, table: str) -> SqlCase:
    where_d, where_q = _where(rnd)
    columns = rnd.sample(["channel", "cityName", "page", "added", "delta", "regionIsoCode"], 2)
    exprs = rnd.choice([("UPPER(channel)", "upper(channel)"), ("added * 2 + delta", "added * 2 + delta"),
                        ("COALESCE(regionIsoCode, countryIsoCode)", "coalesce(regionIsoCode, countryIsoCode)")])  # fmt: skip
    druid = f"SELECT __time, {', '.join(columns)}, {exprs[0]} AS e FROM {table}{where_d}"
    duck = f"SELECT strftime(t, '%Y-%m-%dT%H:%M:%S.%g') || 'Z' AS __time, {', '.join(columns)}, {exprs[1]} AS e FROM raw{where_q}"
    return SqlCase(druid, duck, "scan")


def _subquery(rnd: random.Random, table: str) -> SqlCase:
    (dim_d, dim_q) = rnd.choice(DIMENSIONS[:6])
    where_d, where_q = _where(rnd)
    k = rnd.choice([0, 2, 10])
    druid = (f"SELECT COUNT(*) AS groups, SUM(c) AS total, MAX(c) AS top FROM (SELECT {dim_d} AS d, COUNT(*) AS c "
             f"FROM {table}{where_d} GROUP BY 1) AS s WHERE c > {k}")  # fmt: skip
    duck = (f"SELECT count(*) AS groups, sum(c) AS total, max(c) AS top FROM (SELECT {dim_q} AS d, count(*) AS c "
            f"FROM raw{where_q} GROUP BY 1) AS s WHERE c > {k}")  # fmt: skip
    return SqlCase(druid, duck, "subquery")


def _union(rnd: random.Random, table: str) -> SqlCase:
    a, b = _global(rnd, table), _global(rnd, table)
    first = a.druid.split(" FROM ")[0]
    count = first.count(" AS a")
    # both branches need the same columns: reuse the first branch's select list
    druid = f"{a.druid} UNION ALL {first} FROM {b.druid.split(' FROM ', 1)[1]}"
    duck = f"{a.duck} UNION ALL {a.duck.split(' FROM ')[0]} FROM {b.duck.split(' FROM ', 1)[1]}"
    assert count >= 1
    return SqlCase(druid, duck, "unionAll")


def _exact_distinct(rnd: random.Random, table: str) -> SqlCase:
    dim_d, dim_q = rnd.choice(DIMENSIONS[:6])
    col = rnd.choice(["cityName", "user", "page", "countryName"])
    where_d, where_q = _where(rnd)
    druid = f'SELECT {dim_d} AS d, COUNT(DISTINCT "{col}") AS u FROM {table}{where_d} GROUP BY 1'
    duck = f'SELECT {dim_q} AS d, count(DISTINCT "{col}") AS u FROM raw{where_q} GROUP BY 1'
    return SqlCase(druid, duck, "countDistinct", context={"useApproximateCountDistinct": False})


SHAPES = [(_grouped, 6), (_global, 2), (_selection, 1), (_subquery, 1), (_union, 1), (_exact_distinct, 1)]


def generate_sql(rnd: random.Random, table: str) -> SqlCase:
    makers = [m for m, weight in SHAPES for _ in range(weight)]
    case = rnd.choice(makers)(rnd, table)
    # exact groupBy answers: the approximate topN has its own tests (test_sql_planning)
    case.context.setdefault("useApproximateTopN", False)
    return case
