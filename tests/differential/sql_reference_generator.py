"""Druid SQL generated from Druid's SQL reference, not from what the planner under test knows.

Each category is one documented clause or function family (sql.md, sql-scalar.md,
sql-aggregations.md, sql-window-functions.md, sql-data-types.md, sql-query-context.md) applied to
the wikipedia sample's column types: `__time` TIMESTAMP, the null-heavy VARCHAR dimensions
(cityName, countryName, metroCode, regionIsoCode...), the BIGINT columns. Every expression is built
twice at once: the Druid SQL text and its DuckDB translation over the raw rows
(tests.differential.sql_reference_oracle holds the time-zone and printing rules), with its Druid
SQL type and the column name Druid gives it (the alias, the column's name, else Calcite's `EXPR$n`).
A third of the statements run in a non-UTC session zone, set by the `sqlTimeZone` context
parameter or by a `SET sqlTimeZone = '...';` prefix.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.differential import sql_reference_oracle as o


@dataclass(frozen=True)
class X:
    """One expression: Druid SQL, DuckDB SQL, Druid SQL type; `name` when it is a bare column."""

    d: str
    q: str
    t: str
    name: str | None = None


@dataclass
class RefCase:
    category: str
    druid: str
    duck: str
    names: list[str]
    types: list[str]
    ordered: bool = False  # ORDER BY determines the order of every row
    zone: str = "UTC"
    zone_via: str = "default"  # default (UTC) | context | set
    context: dict[str, Any] = field(default_factory=dict)
    id: str = ""

    def statement(self) -> str:
        if self.zone_via == "set":
            return f"SET sqlTimeZone = '{self.zone}'; {self.druid}"
        return self.druid

    def body(self) -> dict[str, Any]:
        context = dict(self.context)
        if self.zone_via == "context":
            context["sqlTimeZone"] = self.zone
        return {"query": self.statement(), "resultFormat": "array", "header": True, "context": context}


ZONES = ["America/Los_Angeles", "Asia/Kolkata", "Asia/Tokyo", "Europe/Berlin", "America/Sao_Paulo"]


class Ctx:
    """The statement being built: its session zone and the datasource name."""

    def __init__(self, rnd: random.Random, table: str, zone: str):
        self.rnd, self.table, self.zone = rnd, table, zone

    def pick(self, items: list[Any]) -> Any:
        return self.rnd.choice(items)

    def col(self, name: str, qual: str | None = None) -> X:
        ref = f'"{name}"' if qual is None else f'{qual}."{name}"'
        return X(ref, ref, o.COLUMN_TYPES[name], name)

    def ts(self, text: str) -> X:
        return X(f"TIMESTAMP '{text}'", o.ts_literal(text, self.zone), "TIMESTAMP")


def cmp(a: X, op: str, b: X) -> X:
    return X(f"{a.d} {op} {b.d}", f"{a.q} {op} {b.q}", "BOOLEAN")


def lit(v: Any) -> X:
    if isinstance(v, str):
        return X(f"'{v}'", f"'{v}'", "VARCHAR")
    if isinstance(v, float):
        return X(repr(v), repr(v), "DOUBLE")
    return X(str(v), str(v), "BIGINT")


def fn(name: str, *args: X, q: str | None = None, t: str | None = None) -> X:
    """A function spelled the same in both, unless `q` says DuckDB's name."""
    inner = ", ".join(a.d for a in args)
    inner_q = ", ".join(a.q for a in args)
    return X(f"{name}({inner})", f"{q or name.lower()}({inner_q})", t or args[0].t)


# ---- scalar catalog (sql-scalar.md): each a function of the context, returning X -----------------

# "page" is left out: two of its values hold characters beyond the BMP, where Druid (Java strings)
# counts positions in UTF-16 code units and DuckDB in code points
STRING_COLS = [
    "channel",
    "namespace",
    "countryName",
    "cityName",
    "comment",
    "regionName",
    "user",
    "countryIsoCode",
]
NULLY = ["cityName", "countryName", "countryIsoCode", "regionIsoCode", "regionName", "metroCode"]


def string_expr(c: Ctx, qual: str | None = None) -> X:
    s = c.col(c.pick(STRING_COLS), qual)
    s2 = c.col(c.pick(STRING_COLS), qual)
    choices: list[Callable[[], X]] = [
        lambda: fn("UPPER", s),
        lambda: fn("LOWER", s),
        lambda: X(f"CHAR_LENGTH({s.d})", f"length({s.q})", "BIGINT"),
        lambda: X(f"SUBSTRING({s.d}, 2, 3)", o.substring(s.q, 2, 3), "VARCHAR"),
        lambda: X(f"LEFT({s.d}, 3)", f"left({s.q}, 3)", "VARCHAR"),
        lambda: X(f"RIGHT({s.d}, 2)", f"right({s.q}, 2)", "VARCHAR"),
        lambda: X(f"REPLACE({s.d}, 'a', '_')", f"replace({s.q}, 'a', '_')", "VARCHAR"),
        lambda: X(f"STRPOS({s.d}, 'e')", f"strpos({s.q}, 'e')", "BIGINT"),
        lambda: X(f"POSITION('i' IN {s.d})", f"position('i' IN {s.q})", "BIGINT"),
        lambda: X(f"CONCAT({s.d}, '/', {s2.d})", f"({s.q} || '/' || {s2.q})", "VARCHAR"),
        lambda: X(f"{s.d} || '-' || {s2.d}", f"({s.q} || '-' || {s2.q})", "VARCHAR"),
        lambda: X(f"TEXTCAT({s.d}, '!')", f"({s.q} || '!')", "VARCHAR"),
        lambda: X(f"TRIM(BOTH '#' FROM {s.d})", f"trim({s.q}, '#')", "VARCHAR"),
        lambda: X(f"LTRIM({s.d}, '#')", f"ltrim({s.q}, '#')", "VARCHAR"),
        lambda: X(f"LPAD({s.d}, 6, '*')", f"lpad({s.q}, 6, '*')", "VARCHAR"),
        lambda: X(f"RPAD({s.d}, 5, '.')", f"rpad({s.q}, 5, '.')", "VARCHAR"),
        lambda: X(f"REVERSE({s.d})", f"reverse({s.q})", "VARCHAR"),
        lambda: X(
            f"REGEXP_EXTRACT({s.d}, '([a-z]+)\\.', 1)",
            f"CASE WHEN regexp_matches({s.q}, '([a-z]+)\\.') THEN regexp_extract({s.q}, '([a-z]+)\\.', 1) END",
            "VARCHAR",
        ),
        lambda: X(f"REGEXP_LIKE({s.d}, '^[A-M]')", f"regexp_matches({s.q}, '^[A-M]')", "BOOLEAN"),
        lambda: X(f"{s.d} LIKE '%an%'", f"{s.q} LIKE '%an%'", "BOOLEAN"),
        lambda: X(f"CONCAT({s.d}, ':', {s2.d}, '!')", f"({s.q} || ':' || {s2.q} || '!')", "VARCHAR"),
        lambda: X(f"SUBSTRING({s.d} FROM 3 FOR 4)", o.substring(s.q, 3, 4), "VARCHAR"),
        lambda: X(f"TRIM(LEADING '#' FROM {s.d})", f"ltrim({s.q}, '#')", "VARCHAR"),
        lambda: X(f"REPEAT({s.d}, 2)", f"repeat({s.q}, 2)", "VARCHAR"),
        lambda: X(f"ICONTAINS_STRING({s.d}, 'WIKI')", f"contains(lower({s.q}), 'wiki')", "BOOLEAN"),
        lambda: X(f"UPPER(LOWER({s.d}))", f"upper(lower({s.q}))", "VARCHAR"),
    ]
    return c.pick(choices)()


def numeric_expr(c: Ctx, qual: str | None = None) -> X:
    a = c.col(c.pick(o.LONGS), qual)
    b = c.col(c.pick(o.LONGS), qual)
    k = c.pick([2, 3, 7, 10, 1000])
    metro = c.col("metroCode", qual)
    choices: list[Callable[[], X]] = [
        lambda: X(f"{a.d} / {k}", f"({a.q} // {k})", "BIGINT"),  # integer division truncates
        lambda: X(f"{a.d} / {k}.0", f"({a.q} / {k}.0)", "DOUBLE"),
        lambda: X(f"MOD({a.d}, {k})", f"({a.q} % {k})", "BIGINT"),
        lambda: X(f"ABS({a.d})", f"abs({a.q})", "BIGINT"),
        lambda: X(f"{a.d} * 2 - {b.d}", f"({a.q} * 2 - {b.q})", "BIGINT"),
        lambda: X(f"ROUND({a.d} / 3.0, 2)", f"round({a.q} / 3.0, 2)", "DOUBLE"),
        lambda: X(f"FLOOR({a.d} / 4.0)", f"floor({a.q} / 4.0)", "DOUBLE"),
        lambda: X(f"CEIL({a.d} / 4.0)", f"ceil({a.q} / 4.0)", "DOUBLE"),
        lambda: X(f"POWER({a.d}, 2)", f"power({a.q}, 2)", "DOUBLE"),
        lambda: X(f"SQRT(ABS({a.d}))", f"sqrt(abs({a.q}))", "DOUBLE"),
        lambda: X(f"LN(ABS({a.d}) + 1)", f"ln(abs({a.q}) + 1)", "DOUBLE"),
        lambda: X(f"GREATEST({a.d}, {b.d})", f"greatest({a.q}, {b.q})", "BIGINT"),
        lambda: X(f"LEAST({a.d}, 5)", f"least({a.q}, 5)", "BIGINT"),
        lambda: X(f"CAST({metro.d} AS BIGINT) + 1", f"(CAST({metro.q} AS BIGINT) + 1)", "BIGINT"),
        lambda: X(f"{a.d} - {b.d} * 2", f"({a.q} - {b.q} * 2)", "BIGINT"),
        lambda: X(f"DIV({a.d}, {k})", f"({a.q} // {k})", "BIGINT"),
        lambda: X(
            f"SAFE_DIVIDE(CAST({a.d} AS DOUBLE), {b.d})",
            f"CASE WHEN {b.q} <> 0 THEN CAST({a.q} AS DOUBLE) / {b.q} END",
            "DOUBLE",
        ),
        lambda: X(f"BITWISE_AND({a.d}, 255)", f"({a.q} & 255)", "BIGINT"),
        lambda: X(f"ROUND({a.d}, -1)", f"round({a.q}, -1)", "BIGINT"),
    ]
    return c.pick(choices)()


def null_expr(c: Ctx, qual: str | None = None) -> X:
    """SQL three-valued logic and null propagation (sql-data-types: NULL values, Boolean logic)."""
    a = c.col(c.pick(o.LONGS), qual)
    s, s2 = c.col(c.pick(NULLY), qual), c.col(c.pick(NULLY), qual)
    m = c.col("metroCode", qual)
    choices: list[Callable[[], X]] = [
        lambda: X(f"{s.d} IS DISTINCT FROM {s2.d}", f"{s.q} IS DISTINCT FROM {s2.q}", "BOOLEAN"),
        lambda: X(f"{s.d} IS NOT DISTINCT FROM 'US'", f"{s.q} IS NOT DISTINCT FROM 'US'", "BOOLEAN"),
        lambda: X(f"{s.d} NOT IN ('US', NULL)", f"{s.q} NOT IN ('US', NULL)", "BOOLEAN"),
        lambda: X(f"{s.d} IN ('US', 'Paris', 'California')", f"{s.q} IN ('US', 'Paris', 'California')", "BOOLEAN"),
        lambda: X(f"{a.d} + CAST({m.d} AS BIGINT)", f"({a.q} + CAST({m.q} AS BIGINT))", "BIGINT"),
        lambda: X(f"CAST({m.d} AS BIGINT) > 500", f"(CAST({m.q} AS BIGINT) > 500)", "BOOLEAN"),
        lambda: X(f"NULLIF({a.d}, 0)", f"nullif({a.q}, 0)", "BIGINT"),
        lambda: X(f"COALESCE(CAST({m.d} AS DOUBLE), {a.d} / 2.0)", f"coalesce(CAST({m.q} AS DOUBLE), {a.q} / 2.0)",
                  "DOUBLE"),
        lambda: X(f"{s.d} = {s2.d}", f"({s.q} = {s2.q})", "BOOLEAN"),
        lambda: X(f"CASE WHEN {s.d} = 'Paris' THEN 1 WHEN NOT ({s.d} = 'Paris') THEN 0 END",
                  f"CASE WHEN {s.q} = 'Paris' THEN 1 WHEN NOT ({s.q} = 'Paris') THEN 0 END", "BIGINT"),
        lambda: X(f"NOT ({s.d} LIKE 'S%') OR {a.d} > 100", f"(NOT ({s.q} LIKE 'S%') OR {a.q} > 100)", "BOOLEAN"),
    ]  # fmt: skip
    return c.pick(choices)()


def case_expr(c: Ctx, qual: str | None = None) -> X:
    a = c.col(c.pick(o.LONGS), qual)
    s = c.col(c.pick(NULLY), qual)
    s2 = c.col(c.pick(STRING_COLS), qual)
    ns = c.col("namespace", qual)
    choices: list[Callable[[], X]] = [
        lambda: X(
            f"CASE WHEN {a.d} > 100 THEN 'big' WHEN {a.d} > 0 THEN 'small' ELSE 'none' END",
            f"CASE WHEN {a.q} > 100 THEN 'big' WHEN {a.q} > 0 THEN 'small' ELSE 'none' END",
            "VARCHAR",
        ),
        lambda: X(
            f"CASE {ns.d} WHEN 'Main' THEN 1 WHEN 'Talk' THEN 2 ELSE 0 END",
            f"CASE {ns.q} WHEN 'Main' THEN 1 WHEN 'Talk' THEN 2 ELSE 0 END",
            "BIGINT",
        ),
        lambda: X(
            f"CASE WHEN {s.d} IS NULL THEN 'none' ELSE {s.d} END",
            f"CASE WHEN {s.q} IS NULL THEN 'none' ELSE {s.q} END",
            "VARCHAR",
        ),
        lambda: X(f"CASE WHEN {s.d} = 'x' THEN 1 END", f"CASE WHEN {s.q} = 'x' THEN 1 END", "BIGINT"),
        lambda: X(f"COALESCE({s.d}, {s2.d}, 'unknown')", f"coalesce({s.q}, {s2.q}, 'unknown')", "VARCHAR"),
        lambda: X(f"NVL({s.d}, 'none')", f"coalesce({s.q}, 'none')", "VARCHAR"),
        lambda: X(f"NULLIF({ns.d}, 'Main')", f"nullif({ns.q}, 'Main')", "VARCHAR"),
        lambda: X(
            f"COALESCE(CAST({c.col('metroCode', qual).d} AS BIGINT), -1)",
            f"coalesce(CAST({c.col('metroCode', qual).q} AS BIGINT), -1)",
            "BIGINT",
        ),
        lambda: X(f"{s.d} IS NULL", f"{s.q} IS NULL", "BOOLEAN"),
    ]
    return c.pick(choices)()


CAST_TARGETS = ["VARCHAR", "BIGINT", "DOUBLE", "FLOAT", "TIMESTAMP", "DATE", "BOOLEAN"]


def cast_expr(c: Ctx, target: str, qual: str | None = None) -> X:
    """CAST to `target` from the source types sql-data-types.md describes."""
    z = c.zone
    t = c.col("__time", qual)
    a = c.col(c.pick(o.LONGS), qual)
    m = c.col("metroCode", qual)
    b = c.col(c.pick(["isRobot", "isNew", "isMinor", "isAnonymous", "isUnpatrolled"]), qual)
    wall = o.local(t.q, z)
    options: dict[str, list[Callable[[], X]]] = {
        "VARCHAR": [
            lambda: X(f"CAST({a.d} AS VARCHAR)", f"CAST({a.q} AS VARCHAR)", "VARCHAR"),
            # TIMESTAMP -> string: standard SQL formatting in the session zone (sql-data-types)
            lambda: X(f"CAST({t.d} AS VARCHAR)", f"strftime({wall}, '%Y-%m-%d %H:%M:%S')", "VARCHAR"),
            lambda: X(
                f"CAST(CAST({t.d} AS DATE) AS VARCHAR)", f"strftime({wall}::DATE, '%Y-%m-%d')", "VARCHAR"
            ),
        ],
        "BIGINT": [
            lambda: X(f"CAST({m.d} AS BIGINT)", f"CAST({m.q} AS BIGINT)", "BIGINT"),
            lambda: X(f"CAST({t.d} AS BIGINT)", f"epoch_ms({t.q})", "BIGINT"),
            lambda: X(f"CAST({a.d} / 7.0 AS BIGINT)", f"CAST(trunc({a.q} / 7.0) AS BIGINT)", "BIGINT"),
            lambda: X("CAST('42' AS BIGINT)", "42", "BIGINT"),
        ],
        "DOUBLE": [
            lambda: X(f"CAST({a.d} AS DOUBLE)", f"CAST({a.q} AS DOUBLE)", "DOUBLE"),
            lambda: X(f"CAST({m.d} AS DOUBLE)", f"CAST({m.q} AS DOUBLE)", "DOUBLE"),
            lambda: X(f"CAST({a.d} AS DOUBLE) / 8", f"(CAST({a.q} AS DOUBLE) / 8)", "DOUBLE"),
        ],
        "FLOAT": [
            lambda: X(f"CAST({a.d} AS FLOAT)", f"CAST({a.q} AS FLOAT)", "FLOAT"),
            lambda: X(f"CAST({m.d} AS FLOAT)", f"CAST({m.q} AS FLOAT)", "FLOAT"),
        ],
        "TIMESTAMP": [
            lambda: X(
                "CAST('2015-09-12 10:00:00' AS TIMESTAMP)",
                o.ts_literal("2015-09-12 10:00:00", z),
                "TIMESTAMP",
            ),
            lambda: X(
                f"CAST(CAST({t.d} AS DATE) AS TIMESTAMP)",
                o.instant(f"CAST({wall}::DATE AS TIMESTAMP)", z),
                "TIMESTAMP",
            ),
            lambda: X(f"CAST({t.d} AS TIMESTAMP)", t.q, "TIMESTAMP"),
        ],
        "DATE": [
            lambda: X(f"CAST({t.d} AS DATE)", f"CAST({wall} AS DATE)", "DATE"),
            lambda: X("CAST('2015-09-12' AS DATE)", "DATE '2015-09-12'", "DATE"),
            lambda: X(
                f"CAST(TIMESTAMPADD(HOUR, 12, {t.d}) AS DATE)",
                f"CAST({o.local(f'({t.q} + INTERVAL 12 HOUR)', z)} AS DATE)",
                "DATE",
            ),
        ],
        "BOOLEAN": [
            lambda: X(f"CAST({b.d} AS BOOLEAN)", f"CAST({b.q} AS BOOLEAN)", "BOOLEAN"),
            lambda: X(
                f"CAST(CASE WHEN {a.d} > 10 THEN 'true' ELSE 'false' END AS BOOLEAN)",
                f"({a.q} > 10)",
                "BOOLEAN",
            ),
        ],
    }
    return c.pick(options[target])()


FLOOR_UNITS = ["MINUTE", "HOUR", "DAY", "WEEK", "MONTH"]
FORMATS = ["yyyy-MM-dd HH:mm", "HH", "yyyy-MM-dd", "yyyy-MM-dd'T'HH:mm:ss.SSS", "EEE HH:mm", None]


def time_expr(c: Ctx, kind: str, qual: str | None = None) -> X:
    """A time function of sql-scalar.md's date and time section, in the session zone."""
    z = c.zone
    t = c.col("__time", qual)
    if kind == "time_floor":
        period = c.pick(["PT15M", "PT1H", "PT6H", "PT12H", "P1D", "P1W", "P1M"])
        return X(f"TIME_FLOOR({t.d}, '{period}')", o.time_floor(t.q, period, z), "TIMESTAMP")
    if kind == "floor_to":
        unit = c.pick(FLOOR_UNITS)
        return X(f"FLOOR({t.d} TO {unit})", o.floor_to(t.q, unit, z), "TIMESTAMP")
    if kind == "time_format":
        pattern = c.pick(FORMATS)
        if pattern is None:
            return X(f"TIME_FORMAT({t.d})", t.q, "TIMESTAMP_TEXT")
        explicit = c.pick([None, None, "Asia/Tokyo"])
        zone = explicit or z
        tail = f", '{explicit}'" if explicit else ""
        quoted = pattern.replace("'", "''")
        return X(f"TIME_FORMAT({t.d}, '{quoted}'{tail})", o.joda_format(t.q, pattern, zone), "VARCHAR")
    if kind == "time_extract":
        unit = c.pick(["HOUR", "MINUTE", "DAY", "DOW", "DOY", "WEEK", "QUARTER", "EPOCH"])
        explicit = c.pick([None, None, "America/New_York"])
        tail = f", '{explicit}'" if explicit else ""
        return X(f"TIME_EXTRACT({t.d}, '{unit}'{tail})", o.extract(t.q, unit, explicit or z), "BIGINT")
    if kind == "extract":
        unit = c.pick(["HOUR", "MINUTE", "SECOND", "DAY", "DOY", "MONTH", "YEAR", "QUARTER", "WEEK", "EPOCH"])
        return X(f"EXTRACT({unit} FROM {t.d})", o.extract(t.q, unit, z), "BIGINT")
    if kind == "millis_to_timestamp":
        return c.pick([
            lambda: X(f"MILLIS_TO_TIMESTAMP(TIMESTAMP_TO_MILLIS({t.d}) + 90 * 60000)",
                      f"({t.q} + INTERVAL 90 MINUTE)", "TIMESTAMP"),
            lambda: X(f"TIME_FLOOR(MILLIS_TO_TIMESTAMP(TIMESTAMP_TO_MILLIS({t.d}) - 3600000), 'PT1H')",
                      o.time_floor(f"({t.q} - INTERVAL 1 HOUR)", "PT1H", z), "TIMESTAMP"),
            lambda: X(f"TIMESTAMP_TO_MILLIS({t.d}) / 60000", f"(epoch_ms({t.q}) // 60000)", "BIGINT"),
            lambda: X(f"MILLIS_TO_TIMESTAMP({c.col('added', qual).d} * 1000)",
                      f"epoch_ms({c.col('added', qual).q} * 1000)", "TIMESTAMP"),
        ])()  # fmt: skip
    if kind == "timestampadd":
        unit, n = c.pick([("HOUR", 2), ("MINUTE", -30), ("SECOND", 45), ("DAY", 1), ("DAY", -1), ("MONTH", 1),
                          ("WEEK", 1)])  # fmt: skip
        base = c.pick([t, X(f"FLOOR({t.d} TO DAY)", o.floor_to(t.q, "DAY", z), "TIMESTAMP")])
        if unit in ("DAY", "MONTH", "WEEK"):  # calendar arithmetic on the wall time
            q = o.instant(f"({o.local(base.q, z)} + INTERVAL ({n}) {unit})", z)
        else:
            q = f"({base.q} + INTERVAL ({n}) {unit})"
        return X(f"TIMESTAMPADD({unit}, {n}, {base.d})", q, "TIMESTAMP")
    if kind == "timestampdiff":
        unit, ms = c.pick([("SECOND", 1000), ("MINUTE", 60_000), ("HOUR", 3_600_000), ("DAY", 86_400_000)])
        other = c.pick([
            X(f"FLOOR({t.d} TO DAY)", o.floor_to(t.q, "DAY", z), "TIMESTAMP"),
            c.ts("2015-09-12 12:00:00"),
            c.ts("2015-09-01 00:00:00"),
        ])  # fmt: skip
        first, second = c.pick([(other, t), (t, other)])
        q = f"((epoch_ms({second.q}) - epoch_ms({first.q})) // {ms})"
        return X(f"TIMESTAMPDIFF({unit}, {first.d}, {second.d})", q, "BIGINT")
    if kind == "ceil_shift_trunc_parse":
        return c.pick([
            lambda: X(f"CEIL({t.d} TO HOUR)", o.time_ceil(t.q, "PT1H", z), "TIMESTAMP"),
            lambda: X(f"CEIL({t.d} TO DAY)", o.time_ceil(t.q, "P1D", z), "TIMESTAMP"),
            lambda: X(f"TIME_CEIL({t.d}, 'PT6H')", o.time_ceil(t.q, "PT6H", z), "TIMESTAMP"),
            lambda: X(f"TIME_SHIFT({t.d}, 'PT1H', -2)", f"({t.q} - INTERVAL 2 HOUR)", "TIMESTAMP"),
            lambda: X(f"TIME_SHIFT(FLOOR({t.d} TO DAY), 'P1D', 1)",
                      o.instant(f"({o.local(o.floor_to(t.q, 'DAY', z), z)} + INTERVAL 1 DAY)", z), "TIMESTAMP"),
            lambda: X(f"DATE_TRUNC('hour', {t.d})", o.floor_to(t.q, "HOUR", z), "TIMESTAMP"),
            lambda: X(f"DATE_TRUNC('day', {t.d})", o.floor_to(t.q, "DAY", z), "TIMESTAMP"),
            lambda: X(f"TIME_PARSE(TIME_FORMAT({t.d}, 'yyyy-MM-dd HH'), 'yyyy-MM-dd HH')",
                      o.instant(f"date_trunc('hour', {o.local(t.q, z)})", z), "TIMESTAMP"),
            lambda: X("TIME_PARSE('2015-09-12T10:00:00Z')", "TIMESTAMP '2015-09-12 10:00:00'", "TIMESTAMP"),
        ])()  # fmt: skip
    raise ValueError(kind)


TIME_KINDS = ["time_floor", "floor_to", "time_format", "time_extract", "extract", "millis_to_timestamp",
              "timestampadd", "timestampdiff", "ceil_shift_trunc_parse"]  # fmt: skip
TIME_LABELS = {"time_floor": "TIME_FLOOR", "floor_to": "FLOOR(__time TO unit)", "time_format": "TIME_FORMAT",
               "time_extract": "TIME_EXTRACT", "extract": "EXTRACT", "millis_to_timestamp": "MILLIS_TO_TIMESTAMP",
               "timestampadd": "TIMESTAMPADD", "timestampdiff": "TIMESTAMPDIFF",
               "ceil_shift_trunc_parse": "CEIL/TIME_SHIFT/DATE_TRUNC/TIME_PARSE"}  # fmt: skip


# ---- predicates -------------------------------------------------------------------------------

# (interval, start, end); an interval without an offset is read in the session zone (Druid parses
# it with the session's chronology)
INTERVALS = [("2015-09-12T20:00:00Z/PT3H", "2015-09-12 20:00:00", "2015-09-12 23:00:00"),
             ("2015-09-12T01:00:00.000Z/2015-09-12T02:30:00.000Z", "2015-09-12 01:00:00", "2015-09-12 02:30:00"),
             ("2015-09-12T06:00:00Z/PT6H", "2015-09-12 06:00:00", "2015-09-12 12:00:00"),
             ("2015-09-12T13:15:00Z/2015-09-12T14:00:00Z", "2015-09-12 13:15:00", "2015-09-12 14:00:00"),
             ("2015-09-12T08:00:00/PT4H", "2015-09-12 08:00:00", "2015-09-12 12:00:00"),
             ("2015-09-12T15:30:00/2015-09-12T17:00:00", "2015-09-12 15:30:00", "2015-09-12 17:00:00")]  # fmt: skip


def in_interval(c: Ctx, qual: str | None = None) -> X:
    t = c.col("__time", qual)
    iv, start, end = c.pick(INTERVALS)
    zone = "UTC" if iv.count("Z") else c.zone
    return X(f"TIME_IN_INTERVAL({t.d}, '{iv}')",
             f"({t.q} >= {o.ts_literal(start, zone)} AND {t.q} < {o.ts_literal(end, zone)})", "BOOLEAN")  # fmt: skip


def predicate(c: Ctx, qual: str | None = None) -> X:
    col = lambda n: c.col(n, qual)  # noqa: E731
    t = col("__time")
    choices: list[Callable[[], X]] = [
        lambda: X(f"{col('cityName').d} IS NULL", f"{col('cityName').q} IS NULL", "BOOLEAN"),
        lambda: X(
            f"{col('regionIsoCode').d} IS NOT NULL", f"{col('regionIsoCode').q} IS NOT NULL", "BOOLEAN"
        ),
        lambda: cmp(col("countryName"), "=", lit("United States")),
        lambda: cmp(col("countryIsoCode"), "<>", lit("US")),
        lambda: X(
            f"{col('channel').d} IN ('#en.wikipedia', '#de.wikipedia', '#fr.wikipedia')",
            f"{col('channel').q} IN ('#en.wikipedia', '#de.wikipedia', '#fr.wikipedia')",
            "BOOLEAN",
        ),
        lambda: cmp(col("namespace"), "<>", lit("Main")),
        lambda: X(f"NOT ({col('isRobot').d} = 'true')", f"NOT ({col('isRobot').q} = 'true')", "BOOLEAN"),
        lambda: X(f"{col('page').d} LIKE 'Talk:%'", f"{col('page').q} LIKE 'Talk:%'", "BOOLEAN"),
        lambda: X(
            f"({col('countryIsoCode').d} = 'US' OR {col('cityName').d} = 'Paris')",
            f"({col('countryIsoCode').q} = 'US' OR {col('cityName').q} = 'Paris')",
            "BOOLEAN",
        ),
        lambda: X(f"{col('metroCode').d} IS NOT NULL", f"{col('metroCode').q} IS NOT NULL", "BOOLEAN"),
        lambda: cmp(col("delta"), "<", lit(0)),
        lambda: X(f"{col('added').d} BETWEEN 10 AND 100", f"{col('added').q} BETWEEN 10 AND 100", "BOOLEAN"),
        lambda: X(
            f"CONTAINS_STRING({col('comment').d}, 'bot')", f"contains({col('comment').q}, 'bot')", "BOOLEAN"
        ),
        lambda: cmp(col("isNew"), "=", lit("true")),
        lambda: X(
            f"{t.d} >= {c.ts('2015-09-12 06:00:00').d} AND {t.d} < {c.ts('2015-09-12 18:30:00').d}",
            f"{t.q} >= {c.ts('2015-09-12 06:00:00').q} AND {t.q} < {c.ts('2015-09-12 18:30:00').q}",
            "BOOLEAN",
        ),
        lambda: in_interval(c, qual),
        lambda: X(
            f"NOT ({col('regionName').d} LIKE 'C%')", f"NOT ({col('regionName').q} LIKE 'C%')", "BOOLEAN"
        ),
    ]
    return c.pick(choices)()


def where(c: Ctx, p: float = 0.6, qual: str | None = None) -> tuple[str, str]:
    if c.rnd.random() >= p:
        return "", ""
    parts = [predicate(c, qual) for _ in range(c.rnd.randint(1, 2))]
    return " WHERE " + " AND ".join(x.d for x in parts), " WHERE " + " AND ".join(x.q for x in parts)


def nested_time_where(c: Ctx) -> tuple[str, str]:
    """TIME_IN_INTERVAL inside parenthesised AND/OR trees (sql-scalar: any ISO 8601 interval)."""
    a, b, d = in_interval(c), in_interval(c), in_interval(c)
    p, r = predicate(c), predicate(c)
    shapes = [
        (f"({a.d} OR {b.d}) AND {p.d}", f"({a.q} OR {b.q}) AND {p.q}"),
        (f"{p.d} AND ({a.d} AND ({r.d} OR {b.d}))", f"{p.q} AND ({a.q} AND ({r.q} OR {b.q}))"),
        (f"(({a.d} AND {p.d}) OR ({b.d} AND {r.d}))", f"(({a.q} AND {p.q}) OR ({b.q} AND {r.q}))"),
        (f"NOT ({a.d}) AND ({b.d} OR {d.d})", f"NOT ({a.q}) AND ({b.q} OR {d.q})"),
        (f"({a.d})", f"({a.q})"),
    ]
    dd, qq = c.pick(shapes)
    return f" WHERE {dd}", f" WHERE {qq}"


# ---- aggregates (sql-aggregations.md) -----------------------------------------------------------


def aggregate(c: Ctx, qual: str | None = None) -> X:
    col = lambda n: c.col(n, qual)  # noqa: E731
    a, n = col(c.pick(o.LONGS)), col(c.pick(NULLY))
    t = col("__time")
    choices: list[Callable[[], X]] = [
        lambda: X("COUNT(*)", "count(*)", "BIGINT"),
        lambda: X(f"COUNT({n.d})", f"count({n.q})", "BIGINT"),
        lambda: X(f"SUM({a.d})", f"sum({a.q})", "BIGINT"),
        lambda: X(f"MIN({a.d})", f"min({a.q})", "BIGINT"),
        lambda: X(f"MAX({a.d})", f"max({a.q})", "BIGINT"),
        lambda: X(f"AVG({a.d})", f"avg({a.q})", "DOUBLE"),
        lambda: X(f"SUM({a.d} - {col('deleted').d})", f"sum({a.q} - {col('deleted').q})", "BIGINT"),
        lambda: X(f"MAX(CHAR_LENGTH({n.d}))", f"max(length({n.q}))", "BIGINT"),
        lambda: X(f"MIN({t.d})", f"min({t.q})", "TIMESTAMP"),
        lambda: X(f"MAX({t.d})", f"max({t.q})", "TIMESTAMP"),
        lambda: X(
            f"SUM(CAST({col('metroCode').d} AS BIGINT))",
            f"sum(CAST({col('metroCode').q} AS BIGINT))",
            "BIGINT",
        ),
    ]
    return c.pick(choices)()


def filtered_aggregate(c: Ctx) -> X:
    p = predicate(c)
    a = c.col(c.pick(o.LONGS))
    return c.pick([
        X(f"COUNT(*) FILTER (WHERE {p.d})", f"count(*) FILTER (WHERE {p.q})", "BIGINT"),
        X(f"SUM({a.d}) FILTER (WHERE {p.d})", f"sum({a.q}) FILTER (WHERE {p.q})", "BIGINT"),
        X(f"MAX({a.d}) FILTER (WHERE {p.d})", f"max({a.q}) FILTER (WHERE {p.q})", "BIGINT"),
        X(f"AVG({a.d}) FILTER (WHERE {p.d})", f"avg({a.q}) FILTER (WHERE {p.q})", "DOUBLE"),
    ])  # fmt: skip


def time_aggregate(c: Ctx) -> X:
    t = c.col("__time")
    return c.pick([
        X(f"MIN({t.d})", f"min({t.q})", "TIMESTAMP"),
        X(f"MAX({t.d})", f"max({t.q})", "TIMESTAMP"),
        X(f"EARLIEST({t.d})", f"min({t.q})", "TIMESTAMP"),
        X(f"LATEST({t.d})", f"max({t.q})", "TIMESTAMP"),
        X(f"MAX(FLOOR({t.d} TO HOUR))", f"max({o.floor_to(t.q, 'HOUR', c.zone)})", "TIMESTAMP"),
        X(f"TIMESTAMPDIFF(MINUTE, MIN({t.d}), MAX({t.d}))",
          f"((epoch_ms(max({t.q})) - epoch_ms(min({t.q}))) // 60000)", "BIGINT"),
    ])  # fmt: skip


def earliest_latest(c: Ctx) -> X:
    """EARLIEST/LATEST take the value at the earliest/latest __time (the sample's times are unique);
    over columns without nulls, as whether a null counts as the earliest value is not documented."""
    t = c.col("__time")
    s, a = c.col(c.pick(["channel", "namespace", "page", "user"])), c.col(c.pick(o.LONGS))
    forms = [("EARLIEST({})", "arg_min", a), ("LATEST({})", "arg_max", a), ("EARLIEST({}, 1024)", "arg_min", s),
             ("LATEST({}, 1024)", "arg_max", s), ("EARLIEST({})", "arg_min", s),
             (f"LATEST_BY({{}}, {t.d})", "arg_max", a)]  # fmt: skip
    form, duck, x = c.pick(forms)
    return X(form.format(x.d), f"{duck}({x.q}, {t.q})", x.t)


# ---- grouping keys ----------------------------------------------------------------------------

LOW_CARD = ["channel", "namespace", "countryName", "isRobot", "isNew", "metroCode", "cityName", "regionIsoCode",
            "countryIsoCode"]  # fmt: skip


def dimension(c: Ctx, qual: str | None = None) -> X:
    r = c.rnd.random()
    if r < 0.55:
        return c.col(c.pick(LOW_CARD), qual)
    if r < 0.75:
        return time_expr(c, c.pick(["floor_to", "time_floor", "time_extract", "time_format"]), qual)
    return c.pick([case_expr, string_expr])(c, qual)


# ---- statement assembly -----------------------------------------------------------------------


@dataclass
class Select:
    items: list[tuple[X, str | None]]  # (expression, alias)

    def names(self) -> list[str]:
        """Calcite's names: an unnamed item is `EXPR$n`, n the number of distinct names before it
        (Druid's quidem show.iq: `SELECT pickup, cnt, cnt, SUM(..) OVER (..)` names the last EXPR$2)."""
        out: list[str] = []
        for x, alias in self.items:
            out.append(alias or x.name or f"EXPR${len(set(out))}")
        return out

    def types(self) -> list[str]:
        return [x.t for x, _ in self.items]

    def sql(self) -> tuple[str, str]:
        d = ", ".join(x.d + (f" AS {alias}" if alias else "") for x, alias in self.items)
        q = ", ".join(x.q + (f' AS "{name}"') for (x, _), name in zip(self.items, self.names(), strict=True))
        return d, q


def maybe_alias(c: Ctx, x: X, alias: str, p: float = 0.6) -> str | None:
    return alias if (x.name is None and c.rnd.random() < p) or c.rnd.random() < 0.15 else None


def order_nulls(direction: str) -> str:
    """Druid sorts nulls first ascending and last descending (sorting-orders.md: null is lowest)."""
    return "NULLS FIRST" if direction == "ASC" else "NULLS LAST"


def grouped(c: Ctx, dims: list[X], aggs: list[X], *, where_dq: tuple[str, str] = ("", ""),
            having: tuple[str, str] | None = None, order: str = "none", group_style: str = "ordinal",
            offset: int = 0, select_dims: bool = True) -> tuple[str, str, Select, bool]:  # fmt: skip
    """SELECT dims, aggs FROM table [WHERE] GROUP BY [HAVING] [ORDER BY ... LIMIT]."""
    items: list[tuple[X, str | None]] = []
    if select_dims:
        items += [(x, maybe_alias(c, x, f"d{i}")) for i, x in enumerate(dims)]
    items += [(x, maybe_alias(c, x, f"a{i}", 0.8)) for i, x in enumerate(aggs)]
    sel = Select(items)
    sd, sq = sel.sql()
    if group_style == "ordinal" and select_dims:
        gd = gq = ", ".join(str(i + 1) for i in range(len(dims)))
    else:
        gd, gq = ", ".join(x.d for x in dims), ", ".join(x.q for x in dims)
    d = f"SELECT {sd} FROM {c.table}{where_dq[0]} GROUP BY {gd}"
    q = f"SELECT {sq} FROM {c.table}{where_dq[1]} GROUP BY {gq}"
    if having:
        d += f" HAVING {having[0]}"
        q += f" HAVING {having[1]}"
    ordered = False
    if order != "none":
        direction = c.pick(["DESC", "ASC"])
        key_d, key_q = (
            (aggs[0].d, aggs[0].q)
            if order == "unselected" or not aggs
            else (str(len(dims) + 1 if select_dims else 1), str(len(dims) + 1 if select_dims else 1))
        )
        ties_d = "".join(f", {x.d}" for x in dims)
        ties_q = "".join(f", {x.q} ASC NULLS FIRST" for x in dims)
        limit = c.pick([1, 3, 5, 10, 25])
        tail_d = f" LIMIT {limit}" + (f" OFFSET {offset}" if offset else "")
        d += f" ORDER BY {key_d} {direction}{ties_d}{tail_d}"
        q += f" ORDER BY {key_q} {direction} {order_nulls(direction)}{ties_q}{tail_d}"
        ordered = True
    return d, q, sel, ordered


def case_from(category: str, d: str, q: str, sel: Select, ordered: bool = False) -> RefCase:
    return RefCase(category, d, q, sel.names(), sel.types(), ordered)


def ungrouped(c: Ctx, category: str, aggs: list[X], wdq: tuple[str, str] | None = None, p: float = 0.6,
              tail_d: str = "") -> RefCase:  # fmt: skip
    """SELECT aggregates FROM table [WHERE]: one row, even over no rows."""
    sel = Select([(x, maybe_alias(c, x, f"a{i}", p)) for i, x in enumerate(aggs)])
    wd, wq = wdq if wdq is not None else where(c)
    sd, sq = sel.sql()
    return case_from(
        category, f"SELECT {sd} FROM {c.table}{wd}{tail_d}", f"SELECT {sq} FROM {c.table}{wq}", sel
    )


# ---- categories -------------------------------------------------------------------------------


def g_qualified(c: Ctx) -> RefCase:
    alias = c.pick(["t", "w", "wiki", None])
    qual = alias or c.table
    dim = c.col(c.pick(LOW_CARD), qual)
    agg = c.pick([X(f'SUM({qual}."added")', f'sum({qual}."added")', "BIGINT"), X("COUNT(*)", "count(*)", "BIGINT"),
                  X(f'MAX({qual}."__time")', f'max({qual}."__time")', "TIMESTAMP")])  # fmt: skip
    p = predicate(c, qual)
    sel = Select([(dim, maybe_alias(c, dim, "d")), (agg, maybe_alias(c, agg, "a"))])
    sd, sq = sel.sql()
    frm = f"{c.table} AS {alias}" if alias else c.table
    return case_from(
        "qualified names",
        f"SELECT {sd} FROM {frm} WHERE {p.d} GROUP BY {dim.d}",
        f"SELECT {sq} FROM {frm} WHERE {p.q} GROUP BY {dim.q}",
        sel,
    )


def g_cte(c: Ctx) -> RefCase:
    dim = dimension(c)
    agg = aggregate(c)
    wd, wq = where(c)
    k = c.pick([0, 5, 50])
    inner_d = f"SELECT {dim.d} AS d, COUNT(*) AS c, {agg.d} AS m FROM {c.table}{wd} GROUP BY 1"
    inner_q = f"SELECT {dim.q} AS d, count(*) AS c, {agg.q} AS m FROM {c.table}{wq} GROUP BY 1"
    cols = c.pick(["d, c, m", "*"])
    d = f"WITH s AS ({inner_d}) SELECT {cols} FROM s WHERE c > {k}"
    q = f"WITH s AS ({inner_q}) SELECT {cols} FROM s WHERE c > {k}"
    ordered = c.rnd.random() < 0.5
    if ordered:
        d += " ORDER BY c DESC, d LIMIT 10"
        q += " ORDER BY c DESC, d ASC NULLS FIRST LIMIT 10"
    return RefCase("CTE", d, q, ["d", "c", "m"], [dim.t, "BIGINT", agg.t], ordered)


def g_subquery(c: Ctx) -> RefCase:
    dim = dimension(c)
    wd, wq = where(c)
    k = c.pick([0, 2, 10])
    if c.rnd.random() < 0.5:
        d = (
            f"SELECT COUNT(*) AS groups, SUM(c) AS total, MAX(c) AS top FROM (SELECT {dim.d} AS d, COUNT(*) AS c "
            f"FROM {c.table}{wd} GROUP BY 1) AS s WHERE c > {k}"
        )
        q = (f"SELECT count(*) AS groups, sum(c) AS total, max(c) AS top FROM (SELECT {dim.q} AS d, count(*) AS c "
             f"FROM {c.table}{wq} GROUP BY 1) AS s WHERE c > {k}")  # fmt: skip
        return RefCase("subquery in FROM", d, q, ["groups", "total", "top"], ["BIGINT", "BIGINT", "BIGINT"])
    e = numeric_expr(c)
    d = f"SELECT MAX(x), MIN(x), COUNT(*) FROM (SELECT {e.d} AS x FROM {c.table}{wd})"
    q = f"SELECT max(x), min(x), count(*) FROM (SELECT {e.q} AS x FROM {c.table}{wq})"
    return RefCase("subquery in FROM", d, q, ["EXPR$0", "EXPR$1", "EXPR$2"], [e.t, e.t, "BIGINT"])


def g_group_by_empty(c: Ctx) -> RefCase:
    aggs = [aggregate(c) for _ in range(c.rnd.randint(1, 3))]
    wd, wq = where(c, 0.7)
    return ungrouped(c, "GROUP BY ()", aggs, (wd, wq), 0.3, " GROUP BY ()")


def g_global(c: Ctx) -> RefCase:
    """Aggregates without GROUP BY, including over no rows (SQL-compatible nulls)."""
    aggs = [aggregate(c) for _ in range(c.rnd.randint(1, 3))]
    if c.rnd.random() < 0.3:
        wd, wq = " WHERE \"channel\" = 'no such channel'", " WHERE \"channel\" = 'no such channel'"
    else:
        wd, wq = where(c, 0.8)
    return ungrouped(c, "aggregate without GROUP BY", aggs, (wd, wq), 0.5)


def g_group_by_ordinal(c: Ctx) -> RefCase:
    dims = [dimension(c) for _ in range(c.rnd.randint(1, 2))]
    aggs = [aggregate(c) for _ in range(c.rnd.randint(1, 2))]
    d, q, sel, ordered = grouped(c, dims, aggs, where_dq=where(c), group_style="ordinal")
    return case_from("GROUP BY ordinal", d, q, sel, ordered)


def g_cast(c: Ctx) -> RefCase:
    target = c.pick(CAST_TARGETS)
    x = cast_expr(c, target)
    if c.rnd.random() < 0.5:  # as a grouping key
        d, q, sel, ordered = grouped(c, [x], [X("COUNT(*)", "count(*)", "BIGINT")], where_dq=where(c))
    else:  # in a selection ordered by __time
        t = c.col("__time")
        limit = c.pick([5, 20])
        wd, wq = where(c)
        sel = Select([(t, None), (x, maybe_alias(c, x, "v"))])
        sd, sq = sel.sql()
        d = f"SELECT {sd} FROM {c.table}{wd} ORDER BY __time LIMIT {limit}"
        q = f"SELECT {sq} FROM {c.table}{wq} ORDER BY __time LIMIT {limit}"
        ordered = True
    return case_from(f"CAST AS {target}", d, q, sel, ordered)


def g_window(c: Ctx) -> RefCase:
    """Window functions over a grouped query (sql-window-functions.md)."""
    dim = c.col(c.pick(["channel", "namespace", "countryName", "isRobot"]))
    part = c.col(c.pick(["isRobot", "isNew"]))
    wd, wq = where(c)
    agg = c.pick([X("COUNT(*)", "count(*)", "BIGINT"), X('SUM("added")', 'sum("added")', "BIGINT")])
    total = f"{agg.d} DESC, {dim.d}, {part.d}"  # every grouping key: a total order
    total_q = f"{agg.q} DESC, {dim.q} ASC NULLS FIRST, {part.q} ASC NULLS FIRST"
    windows = [
        (f"RANK() OVER (ORDER BY {agg.d} DESC)", f"rank() OVER (ORDER BY {agg.q} DESC)", "BIGINT"),
        (f"DENSE_RANK() OVER (PARTITION BY {part.d} ORDER BY {agg.d} DESC)",
         f"dense_rank() OVER (PARTITION BY {part.q} ORDER BY {agg.q} DESC)", "BIGINT"),
        (f"ROW_NUMBER() OVER (PARTITION BY {part.d} ORDER BY {total})",
         f"row_number() OVER (PARTITION BY {part.q} ORDER BY {total_q})", "BIGINT"),
        (f"SUM({agg.d}) OVER (PARTITION BY {part.d})", f"sum({agg.q}) OVER (PARTITION BY {part.q})", "BIGINT"),
        (f"LAG({agg.d}) OVER (ORDER BY {total})", f"lag({agg.q}) OVER (ORDER BY {total_q})", "BIGINT"),
        (f"LEAD({dim.d}, 1) OVER (ORDER BY {total})", f"lead({dim.q}, 1) OVER (ORDER BY {total_q})", dim.t),
        (f"NTILE(4) OVER (ORDER BY {total})", f"ntile(4) OVER (ORDER BY {total_q})", "BIGINT"),
        (f"FIRST_VALUE({dim.d}) OVER (PARTITION BY {part.d} ORDER BY {total})",
         f"first_value({dim.q}) OVER (PARTITION BY {part.q} ORDER BY {total_q})", dim.t),
        (f"SUM({agg.d}) OVER (ORDER BY {total} ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)",
         f"sum({agg.q}) OVER (ORDER BY {total_q} ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)", "BIGINT"),
        (f"PERCENT_RANK() OVER (ORDER BY {agg.d})", f"percent_rank() OVER (ORDER BY {agg.q})", "DOUBLE"),
        (f"CUME_DIST() OVER (ORDER BY {agg.d})", f"cume_dist() OVER (ORDER BY {agg.q})", "DOUBLE"),
    ]  # fmt: skip
    wdx, wqx, wt = c.pick(windows)
    d = f"SELECT {part.d}, {dim.d}, {agg.d} AS v, {wdx} AS w FROM {c.table}{wd} GROUP BY {part.d}, {dim.d}"
    q = f"SELECT {part.q}, {dim.q}, {agg.q} AS v, {wqx} AS w FROM {c.table}{wq} GROUP BY {part.q}, {dim.q}"
    if part.name == dim.name:
        d = d.replace(f"SELECT {part.d}, ", "SELECT ", 1).replace(f"GROUP BY {part.d}, ", "GROUP BY ")
        q = q.replace(f"SELECT {part.q}, ", "SELECT ", 1).replace(f"GROUP BY {part.q}, ", "GROUP BY ")
        return RefCase("window functions", d, q, [dim.name or "", "v", "w"], [dim.t, agg.t, wt])
    return RefCase(
        "window functions", d, q, [part.name or "", dim.name or "", "v", "w"], [part.t, dim.t, agg.t, wt]
    )


def g_join(c: Ctx) -> RefCase:
    kind = c.pick(["self", "self", "values", "subquery", "in"])
    t = c.table
    if kind == "self":
        key = c.pick(["channel", "namespace", "cityName", "countryName"])
        jt = c.pick(["INNER", "LEFT"])
        wd1, wq1 = where(c, 0.7)
        wd2, wq2 = where(c, 0.7)
        d = (
            f'SELECT a.k, a.c, b.s FROM (SELECT "{key}" AS k, COUNT(*) AS c FROM {t}{wd1} GROUP BY 1) AS a '
            f'{jt} JOIN (SELECT "{key}" AS k, SUM(added) AS s FROM {t}{wd2} GROUP BY 1) AS b ON a.k = b.k'
        )
        q = (
            f'SELECT a.k, a.c, b.s FROM (SELECT "{key}" AS k, count(*) AS c FROM {t}{wq1} GROUP BY 1) AS a '
            f'{jt} JOIN (SELECT "{key}" AS k, sum(added) AS s FROM {t}{wq2} GROUP BY 1) AS b ON a.k = b.k'
        )
        return RefCase("JOIN (self, grouped)", d, q, ["k", "c", "s"], ["VARCHAR", "BIGINT", "BIGINT"])
    if kind == "values":
        jt = c.pick(["INNER", "LEFT"])
        values = "(VALUES ('#en.wikipedia', 'English'), ('#de.wikipedia', 'German'), ('#fr.wikipedia', 'French'), ('#xx.wikipedia', 'none'))"
        wd, wq = where(c, 0.5, "w")
        if jt == "INNER":
            d = (
                f"SELECT v.lang, COUNT(*) AS c, SUM(w.added) AS s FROM {t} AS w INNER JOIN {values} AS v(ch, lang) "
                f"ON w.channel = v.ch{wd} GROUP BY v.lang"
            )
            q = d.replace("COUNT(*)", "count(*)").replace("SUM(", "sum(").replace(wd, wq) if wd else d
            return RefCase("JOIN (VALUES)", d, q, ["lang", "c", "s"], ["VARCHAR", "BIGINT", "BIGINT"])
        d = (
            f"SELECT v.lang, COUNT(w.channel) AS c FROM {values} AS v(ch, lang) LEFT JOIN {t} AS w "
            f"ON w.channel = v.ch GROUP BY v.lang"
        )
        return RefCase(
            "JOIN (VALUES)", d, d.replace("COUNT(", "count("), ["lang", "c"], ["VARCHAR", "BIGINT"]
        )
    if kind == "subquery":
        n = c.pick([3, 5])
        d = (
            f"SELECT w.channel, COUNT(*) AS c FROM {t} AS w INNER JOIN (SELECT channel FROM {t} GROUP BY channel "
            f"ORDER BY COUNT(*) DESC LIMIT {n}) AS top ON w.channel = top.channel WHERE w.added > 10 GROUP BY w.channel"
        )
        q = d.replace("COUNT(*)", "count(*)")
        return RefCase("JOIN (subquery)", d, q, ["channel", "c"], ["VARCHAR", "BIGINT"])
    k = c.pick([50, 500])
    agg = aggregate(c)
    d = (
        f"SELECT namespace, {agg.d} AS a FROM {t} WHERE channel IN (SELECT channel FROM {t} GROUP BY channel "
        f"HAVING COUNT(*) > {k}) GROUP BY namespace"
    )
    q = (
        f"SELECT namespace, {agg.q} AS a FROM {t} WHERE channel IN (SELECT channel FROM {t} GROUP BY channel "
        f"HAVING count(*) > {k}) GROUP BY namespace"
    )
    return RefCase("IN (subquery)", d, q, ["namespace", "a"], ["VARCHAR", agg.t])


def g_grouping_sets(c: Ctx) -> RefCase:
    a, b = c.rnd.sample(["namespace", "isRobot", "isNew", "countryName", "channel"], 2)
    kind = c.pick(["GROUPING SETS", "ROLLUP", "CUBE"])
    spec = {"GROUPING SETS": f"GROUPING SETS (({a}, {b}), ({a}), ())", "ROLLUP": f"ROLLUP ({a}, {b})",
            "CUBE": f"CUBE ({a}, {b})"}[kind]  # fmt: skip
    agg = aggregate(c)
    wd, wq = where(c)
    g = c.rnd.random() < 0.4
    gd = f", GROUPING({a}, {b}) AS g" if g else ""
    d = f"SELECT {a}, {b}, {agg.d} AS m{gd} FROM {c.table}{wd} GROUP BY {spec}"
    q = f"SELECT {a}, {b}, {agg.q} AS m{gd} FROM {c.table}{wq} GROUP BY {spec}"
    names, types = [a, b, "m"], ["VARCHAR", "VARCHAR", agg.t]
    if g:
        names, types = [*names, "g"], [*types, "BIGINT"]
    return RefCase(kind, d, q, names, types)


def g_values(c: Ctx) -> RefCase:
    rows = "(1, 'a', 2.5), (2, 'b', NULL), (3, NULL, -1.0), (4, 'b', 0.5)"
    choices = [
        (f"SELECT x, y, z FROM (VALUES {rows}) AS v(x, y, z) WHERE x > 1", ["x", "y", "z"],
         ["BIGINT", "VARCHAR", "DOUBLE"]),
        (f"SELECT * FROM (VALUES {rows}) AS v(x, y, z) WHERE y IS NOT NULL", ["x", "y", "z"],
         ["BIGINT", "VARCHAR", "DOUBLE"]),
        (f"SELECT y, SUM(x) AS s, COUNT(z) AS n FROM (VALUES {rows}) AS v(x, y, z) GROUP BY y", ["y", "s", "n"],
         ["VARCHAR", "BIGINT", "BIGINT"]),
        (f"SELECT x * 10 + 1 AS e, UPPER(y) AS u FROM (VALUES {rows}) AS v(x, y, z) ORDER BY x DESC", ["e", "u"],
         ["BIGINT", "VARCHAR"]),
        ("SELECT 1 + 2 * 3 AS a, 7 / 2 AS b, 'x' || 'y' AS c, CAST('2015-09-12' AS DATE) AS d", ["a", "b", "c", "d"],
         ["BIGINT", "BIGINT", "VARCHAR", "DATE"]),
    ]  # fmt: skip
    d, names, types = c.pick(choices)
    q = (
        d.replace("UPPER(", "upper(")
        .replace("SUM(", "sum(")
        .replace("COUNT(", "count(")
        .replace("7 / 2", "7 // 2")
    )
    return RefCase("VALUES", d, q, names, types, ordered="ORDER BY" in d)


def g_union(c: Ctx) -> RefCase:
    d1, d2 = dimension(c), dimension(c)
    while d2.t != d1.t:
        d2 = dimension(c)
    w1, w2 = where(c), where(c)
    b1d = f"SELECT {d1.d} AS k, COUNT(*) AS c FROM {c.table}{w1[0]} GROUP BY 1"
    b1q = f"SELECT {d1.q} AS k, count(*) AS c FROM {c.table}{w1[1]} GROUP BY 1"
    b2d = f"SELECT {d2.d}, COUNT(*) FROM {c.table}{w2[0]} GROUP BY 1"
    b2q = f"SELECT {d2.q}, count(*) FROM {c.table}{w2[1]} GROUP BY 1"
    if c.rnd.random() < 0.5:
        return RefCase(
            "UNION ALL", f"{b1d} UNION ALL {b2d}", f"{b1q} UNION ALL {b2q}", ["k", "c"], [d1.t, "BIGINT"]
        )
    d = f"SELECT k, SUM(c) AS total FROM ({b1d} UNION ALL {b2d}) AS u GROUP BY k"
    q = f"SELECT k, sum(c) AS total FROM ({b1q} UNION ALL {b2q}) AS u GROUP BY k"
    return RefCase("UNION ALL", d, q, ["k", "total"], [d1.t, "BIGINT"])


def g_time(c: Ctx, kind: str) -> RefCase:
    x = time_expr(c, kind)
    if c.rnd.random() < 0.6:
        aggs = [c.pick([X("COUNT(*)", "count(*)", "BIGINT"), aggregate(c)])]
        order = c.pick(["none", "selected"])
        d, q, sel, ordered = grouped(c, [x], aggs, where_dq=where(c), order=order,
                                     group_style=c.pick(["ordinal", "expr"]))  # fmt: skip
    else:
        wd, wq = where(c)
        sel = Select([(c.col("__time"), None), (c.col("channel"), None), (x, maybe_alias(c, x, "v"))])
        sd, sq = sel.sql()
        direction = c.pick(["ASC", "DESC"])
        d = f"SELECT {sd} FROM {c.table}{wd} ORDER BY __time {direction} LIMIT 10"
        q = f"SELECT {sq} FROM {c.table}{wq} ORDER BY __time {direction} LIMIT 10"
        ordered = True
    return case_from(TIME_LABELS[kind], d, q, sel, ordered)


def g_time_in_interval(c: Ctx) -> RefCase:
    wd, wq = nested_time_where(c)
    dim = c.col(c.pick(LOW_CARD))
    agg = aggregate(c)
    d, q, sel, ordered = grouped(c, [dim], [agg], where_dq=(wd, wq))
    return case_from("TIME_IN_INTERVAL in AND/OR", d, q, sel, ordered)


def g_min_max_time(c: Ctx) -> RefCase:
    aggs = [time_aggregate(c) for _ in range(c.rnd.randint(1, 2))]
    wd, wq = where(c)
    if c.rnd.random() < 0.5:
        return ungrouped(c, "MIN/MAX/EARLIEST/LATEST(__time)", aggs, (wd, wq), 0.5)
    dims = [c.col(c.pick(LOW_CARD))]
    d, q, sel, ordered = grouped(c, dims, aggs, where_dq=(wd, wq), order=c.pick(["none", "selected"]))
    return case_from("MIN/MAX/EARLIEST/LATEST(__time)", d, q, sel, ordered)


def g_earliest_latest(c: Ctx) -> RefCase:
    aggs = [earliest_latest(c) for _ in range(c.rnd.randint(1, 2))]
    dims = [c.col(c.pick(LOW_CARD))] if c.rnd.random() < 0.7 else []
    if not dims:
        return ungrouped(c, "EARLIEST/LATEST", aggs)
    d, q, sel, ordered = grouped(c, dims, aggs, where_dq=where(c))
    return case_from("EARLIEST/LATEST", d, q, sel, ordered)


def g_null_heavy(c: Ctx) -> RefCase:
    dims = [c.col(c.pick(NULLY))]
    if c.rnd.random() < 0.4:
        dims.append(c.col(c.pick(NULLY)))
        if dims[1].name == dims[0].name:
            dims.pop()
    n = c.col(c.pick(NULLY))
    aggs = [c.pick([X(f"COUNT({n.d})", f"count({n.q})", "BIGINT"), X("COUNT(*)", "count(*)", "BIGINT"),
                    X(f"MIN({n.d})", f"min({n.q})", "VARCHAR"), X(f"MAX({n.d})", f"max({n.q})", "VARCHAR")])]  # fmt: skip
    d, q, sel, ordered = grouped(c, dims, aggs, where_dq=where(c), order=c.pick(["none", "selected"]))
    return case_from("null-heavy columns", d, q, sel, ordered)


def g_having(c: Ctx) -> RefCase:
    dims = [c.col(c.pick(LOW_CARD))]
    aggs = [aggregate(c)]
    k = c.pick([1, 10, 100])
    having = c.pick([
        (f"COUNT(*) > {k}", f"count(*) > {k}"),
        (f"SUM(added) > {k * 100} AND COUNT(*) > 2", f"sum(added) > {k * 100} AND count(*) > 2"),
        (f"MAX(__time) > {c.ts('2015-09-12 20:00:00').d}", f"max(__time) > {c.ts('2015-09-12 20:00:00').q}"),
        (f"COUNT(DISTINCT page) > {k} OR MIN(delta) < 0", f"count(DISTINCT page) > {k} OR min(delta) < 0"),
    ])  # fmt: skip
    d, q, sel, ordered = grouped(c, dims, aggs, where_dq=where(c), having=having)
    case = case_from("HAVING", d, q, sel, ordered)
    case.context["useApproximateCountDistinct"] = False
    return case


def g_order_unselected(c: Ctx) -> RefCase:
    if c.rnd.random() < 0.5:  # grouped, ordered by an aggregate that is not selected
        dim = c.col(c.pick(LOW_CARD))
        key = aggregate(c)
        wd, wq = where(c)
        direction = c.pick(["DESC", "ASC"])
        sel = Select([(dim, None)])
        d = (
            f"SELECT {dim.d} FROM {c.table}{wd} GROUP BY {dim.d} "
            f"ORDER BY {key.d} {direction}, {dim.d} LIMIT 5"
        )
        q = (f"SELECT {dim.q} FROM {c.table}{wq} GROUP BY {dim.q} "
             f"ORDER BY {key.q} {direction} {order_nulls(direction)}, {dim.q} ASC NULLS FIRST LIMIT 5")  # fmt: skip
        return case_from("ORDER BY unselected", d, q, sel, True)
    wd, wq = where(c)
    cols = [c.col(n) for n in c.rnd.sample(["channel", "page", "added", "cityName", "user", "delta"], 2)]
    sel = Select([(x, None) for x in cols])
    sd, sq = sel.sql()
    direction = c.pick(["ASC", "DESC"])
    d = f"SELECT {sd} FROM {c.table}{wd} ORDER BY __time {direction} LIMIT 15"
    q = f"SELECT {sq} FROM {c.table}{wq} ORDER BY __time {direction} LIMIT 15"
    return case_from("ORDER BY unselected", d, q, sel, True)


def g_limit_offset(c: Ctx) -> RefCase:
    if c.rnd.random() < 0.5:
        dims = [c.col(c.pick(LOW_CARD))]
        d, q, sel, ordered = grouped(c, dims, [aggregate(c)], where_dq=where(c), order="selected",
                                     offset=c.pick([1, 3, 10]))  # fmt: skip
        return case_from("LIMIT/OFFSET", d, q, sel, ordered)
    wd, wq = where(c)
    sel = Select([(c.col("__time"), None), (c.col("page"), None), (c.col("added"), None)])
    sd, sq = sel.sql()
    tail = f" LIMIT {c.pick([5, 10])} OFFSET {c.pick([1, 7, 40])}"
    return case_from(
        "LIMIT/OFFSET",
        f"SELECT {sd} FROM {c.table}{wd} ORDER BY __time{tail}",
        f"SELECT {sq} FROM {c.table}{wq} ORDER BY __time{tail}",
        sel,
        True,
    )


def g_filtered(c: Ctx) -> RefCase:
    aggs = [filtered_aggregate(c) for _ in range(c.rnd.randint(1, 2))]
    if c.rnd.random() < 0.5:
        return ungrouped(c, "aggregate FILTER", aggs, None, 0.5)
    d, q, sel, ordered = grouped(c, [c.col(c.pick(LOW_CARD))], aggs, where_dq=where(c))
    return case_from("aggregate FILTER", d, q, sel, ordered)


def _scalar_category(name: str, make: Callable[[Ctx], X]) -> Callable[[Ctx], RefCase]:
    def gen(c: Ctx) -> RefCase:
        x = make(c)
        if c.rnd.random() < 0.5 and x.t != "DOUBLE":
            d, q, sel, ordered = grouped(c, [x], [X("COUNT(*)", "count(*)", "BIGINT")], where_dq=where(c),
                                         group_style=c.pick(["ordinal", "expr"]))  # fmt: skip
            return case_from(name, d, q, sel, ordered)
        wd, wq = where(c)
        sel = Select([(c.col("__time"), None), (x, maybe_alias(c, x, "v"))])
        sd, sq = sel.sql()
        return case_from(
            name,
            f"SELECT {sd} FROM {c.table}{wd} ORDER BY __time DESC LIMIT 12",
            f"SELECT {sq} FROM {c.table}{wq} ORDER BY __time DESC LIMIT 12",
            sel,
            True,
        )

    return gen


def g_scalar_subquery(c: Ctx) -> RefCase:
    """A scalar subquery in WHERE (one row, one column, compared with each row)."""
    a = c.col(c.pick(o.LONGS))
    inner = c.pick([(f"SELECT AVG({a.d}) FROM {c.table}", f"SELECT avg({a.q}) FROM {c.table}"),
                    (f"SELECT MAX({a.d}) / 10 FROM {c.table} WHERE \"namespace\" = 'Talk'",
                     f"SELECT max({a.q}) // 10 FROM {c.table} WHERE \"namespace\" = 'Talk'")])  # fmt: skip
    dim = c.col(c.pick(LOW_CARD))
    wd, wq = f" WHERE {a.d} > ({inner[0]})", f" WHERE {a.q} > ({inner[1]})"
    d, q, sel, ordered = grouped(c, [dim], [aggregate(c)], where_dq=(wd, wq))
    return case_from("scalar subquery", d, q, sel, ordered)


def g_count_distinct(c: Ctx) -> RefCase:
    col = c.col(c.pick(["cityName", "user", "page", "countryName", "channel", "metroCode"]))
    dims = [c.col(c.pick(["namespace", "isRobot", "channel"]))] if c.rnd.random() < 0.6 else []
    agg = X(f"COUNT(DISTINCT {col.d})", f"count(DISTINCT {col.q})", "BIGINT")
    wd, wq = where(c)
    if dims:
        d, q, sel, ordered = grouped(c, dims, [agg], where_dq=(wd, wq))
    else:
        sel = Select([(agg, maybe_alias(c, agg, "u"))])
        sd, sq = sel.sql()
        d, q, ordered = f"SELECT {sd} FROM {c.table}{wd}", f"SELECT {sq} FROM {c.table}{wq}", False
    case = case_from("COUNT(DISTINCT) exact", d, q, sel, ordered)
    case.context["useApproximateCountDistinct"] = False
    return case


CATEGORIES: list[tuple[Callable[[Ctx], RefCase], int]] = [
    (g_qualified, 4), (g_cte, 3), (g_subquery, 3), (g_group_by_empty, 2), (g_global, 3), (g_group_by_ordinal, 3),
    (g_cast, 7), (g_window, 4), (g_join, 5), (g_grouping_sets, 4), (g_values, 2), (g_union, 3),
    *[((lambda kind: lambda c: g_time(c, kind))(k), 2) for k in TIME_KINDS],
    (g_time_in_interval, 3), (g_min_max_time, 3), (g_earliest_latest, 2), (g_null_heavy, 3), (g_having, 3),
    (g_order_unselected, 3), (g_limit_offset, 2), (g_filtered, 3),
    (_scalar_category("CASE/COALESCE/NVL/NULLIF", case_expr), 3),
    (_scalar_category("string functions", string_expr), 4),
    (_scalar_category("numeric functions", numeric_expr), 3), (g_count_distinct, 2),
    (_scalar_category("null semantics", null_expr), 3), (g_scalar_subquery, 2),
]  # fmt: skip


def generate_reference(rnd: random.Random, table: str, index: int) -> RefCase:
    """The `index`-th statement of a seeded run; a third in a non-UTC session zone."""
    via = rnd.choice(["default", "default", "context", "set"])
    zone = "UTC" if via == "default" else rnd.choice(ZONES)
    ctx = Ctx(rnd, table, zone)
    makers = [m for m, weight in CATEGORIES for _ in range(weight)]
    case = rnd.choice(makers)(ctx)
    case.zone, case.zone_via = zone, via
    case.context.setdefault("useApproximateTopN", False)
    case.id = f"s{index:05d}"
    return case
