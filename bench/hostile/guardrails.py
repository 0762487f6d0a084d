"""Hostile requests of issue 36 by category: statements that once took the broker or its host down
(cross joins, recursion), input errors that were 500s (huge literals, bad regular expressions and
timestamps), and requests too large or too deep to read, in SQL and native JSON alike.

Statuses are Druid's: a cross join is answered, refused for the rows it would hold (400) or, past
its deadline, a 504; recursion is refused before any work; every malformed input is a 400, or a
501 where Druid would take it and Strata cannot (a Java-only regular expression).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from typing import Any

from bench.hostile import native_templates as t
from bench.hostile.request import DEADLINE_MS, NATIVE_PATH, Hostile, native, sql

TABLE = "wikipedia"
INTERVAL = "2015-09-12/2015-09-13"
BIG_NUMBERS = [
    "18446744073709551616",
    "1e+308",
    "1e400",
    "99999999999999999999999999999999999999",
    "-18446744073709551616",
    "9223372036854775808",
]
BAD_PATTERNS = ["(((((", "[a-", "*", "a{2,1}", "(?P<x", "\\", "a**", "[[:nope:]]", ")", "(?<", "\\p{Nope}"]
JAVA_ONLY_PATTERNS = ["(?<=a)b", "(?=x)", "(a)\\1", "a{100000}", "(?!y)z"]
BAD_TIMES = [
    "2015-13-45 00:00:00",
    "2015-02-30",
    "2015-09-12 25:61:00",
    "yesterday",
    "",
    "0000-00-00",
    "2015-09-12T00:00:00+99:00",
    "2015-04-31",
]
BAD_PERIODS = ["PXX", "P", "-P1D", "P1Y2", "PT", "1 day", "P99999999999999999999D"]
BAD_ZONES = ["Mars/Phobos", "+99:00", "", "UTC+", "America/New York"]


def _cross_join(rnd: random.Random) -> Hostile:
    statement = rnd.choice(
        [
            f"SELECT * FROM {TABLE}, {TABLE}, {TABLE}",
            f"SELECT * FROM {TABLE} a CROSS JOIN {TABLE} b",
            f"SELECT COUNT(*) FROM {TABLE} a, {TABLE} b, {TABLE} c",
            f"SELECT a.page, b.page FROM {TABLE} a JOIN {TABLE} b ON TRUE",
            f'SELECT a.page, b."user" FROM {TABLE} a JOIN {TABLE} b ON a.channel = b.channel',
            f"SELECT * FROM {TABLE} a, {TABLE} b WHERE a.added > b.added",
            f"SELECT * FROM (SELECT * FROM {TABLE}) a, (SELECT page FROM {TABLE}) b, {TABLE} c, {TABLE} d",
            f"SELECT a.channel, SUM(b.added) FROM {TABLE} a, {TABLE} b GROUP BY 1 ORDER BY 2 DESC",
        ]
    )
    return sql("cross joins", statement, (200, 400, 429, 504))


def _recursion(rnd: random.Random) -> Hostile:
    statement = rnd.choice(
        [
            "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n+1 FROM r) SELECT * FROM r",
            "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n*2 FROM r WHERE n > 0) "
            "SELECT COUNT(*) FROM r",
            f"WITH RECURSIVE r AS (SELECT page FROM {TABLE} UNION ALL SELECT page FROM r) SELECT * FROM r",
            "WITH RECURSIVE a(n) AS (SELECT 1 UNION ALL SELECT n FROM a, a b) SELECT * FROM a",
            "with recursive t(x) as (values (1) union all select x + 1 from t) select max(x) from t",
        ]
    )
    return sql("recursion", statement, (400, 501))


def _huge_literal(rnd: random.Random) -> Hostile:
    big = rnd.choice(BIG_NUMBERS)
    if rnd.random() < 0.6:
        statement = rnd.choice(
            [
                f"SELECT page FROM {TABLE} LIMIT {big}",
                f"SELECT page FROM {TABLE} LIMIT 5 OFFSET {big}",
                f"SELECT channel, COUNT(*) FROM {TABLE} GROUP BY 1 LIMIT {big}",
                f"SELECT {big} FROM {TABLE} LIMIT 1",
                f"SELECT COUNT(*) FROM {TABLE} WHERE added > {big}",
                f"SELECT {big} * {big}",
                f"SELECT CAST('{big}' AS BIGINT)",
                f"SELECT SUM(added) * {big} FROM {TABLE}",
            ]
        )
        return sql("huge literals", statement, (200, 400))
    number = rnd.choice([2**64, 1e308, -(2**64), 10**40])
    queries = t.QUERIES
    query = rnd.choice(
        [
            {**queries["scan"], "limit": number},
            {**queries["scan"], "offset": number},
            {**queries["topN"], "threshold": number},
            t.with_filter(
                {"type": "bound", "dimension": "added", "lower": str(number), "ordering": "numeric"}
            ),
            t.timeseries(context={"timeout": number}),
        ]
    )
    return native("huge literals", query, (200, 400))


def _bad_regex(rnd: random.Random) -> Hostile:
    java_only = rnd.random() < 0.25
    pattern = rnd.choice(JAVA_ONLY_PATTERNS if java_only else BAD_PATTERNS)
    statuses = (400, 501)
    quoted = pattern.replace("'", "''")
    if rnd.random() < 0.5:
        statement = rnd.choice(
            [
                f"SELECT REGEXP_EXTRACT(page, '{quoted}') FROM {TABLE} LIMIT 3",
                f"SELECT COUNT(*) FROM {TABLE} WHERE REGEXP_LIKE(page, '{quoted}')",
                f"SELECT REGEXP_REPLACE(page, '{quoted}', 'x') FROM {TABLE} LIMIT 3",
                f"SELECT REGEXP_EXTRACT(page, '{quoted}', 1), COUNT(*) FROM {TABLE} GROUP BY 1",
                f"SELECT REGEXP_LIKE('abc', '{quoted}')",
            ]
        )
        return sql("bad regexes", statement, statuses)
    quoted_expr = pattern.replace("\\", "\\\\").replace("'", "\\'")
    base: dict[str, Any] = {
        "queryType": "timeseries",
        "dataSource": TABLE,
        "intervals": [INTERVAL],
        "granularity": "all",
        "aggregations": [{"type": "count", "name": "c"}],
    }
    shape = rnd.choice(["filter", "extraction", "expression", "search"])
    if shape == "filter":
        base["filter"] = {"type": "regex", "dimension": "page", "pattern": pattern}
    elif shape == "extraction":
        base["filter"] = {
            "type": "selector",
            "dimension": "page",
            "value": "x",
            "extractionFn": {"type": rnd.choice(["regex", "partial"]), "expr": pattern},
        }
    elif shape == "expression":
        base["filter"] = {"type": "expression", "expression": f"regexp_like(page, '{quoted_expr}')"}
    else:
        base["filter"] = {
            "type": "search",
            "dimension": "page",
            "query": {"type": "regex", "pattern": pattern},
        }
    return native("bad regexes", base, statuses)


def _bad_timestamp(rnd: random.Random) -> Hostile:
    when = rnd.choice(BAD_TIMES).replace("'", "''")
    if rnd.random() < 0.5:
        statement, statuses = rnd.choice(
            [
                (f"SELECT TIMESTAMP '{when}'", (400,)),
                (f"SELECT COUNT(*) FROM {TABLE} WHERE __time > TIMESTAMP '{when}'", (400,)),
                (f"SELECT COUNT(*) FROM {TABLE} WHERE __time BETWEEN '{when}' AND '{when}'", (200, 400)),
                (f"SELECT DATE '{when[:10]}'", (200, 400)),
                (f"SELECT TIME_PARSE('{when}') FROM {TABLE} LIMIT 2", (200, 400)),
                (f"SELECT TIME_FLOOR(__time, '{rnd.choice(BAD_PERIODS)}') FROM {TABLE} LIMIT 2", (400,)),
                (
                    f"SELECT TIME_SHIFT(__time, 'P1D', {rnd.choice(['1e10', '-99999999999'])}) "
                    f"FROM {TABLE} LIMIT 1",
                    (200, 400),
                ),
                (f"SELECT FLOOR(__time TO DAY) FROM {TABLE} LIMIT 1", (200,)),
                (
                    f"SELECT COUNT(*) FROM {TABLE} WHERE __time > CURRENT_TIMESTAMP - INTERVAL '{when}' DAY",
                    (400,),
                ),
            ]
        )
        zone = rnd.choice([None, *BAD_ZONES])
        context = {} if zone is None else {"sqlTimeZone": zone}
        return sql("bad timestamps", statement, statuses if zone is None else (400,), **context)
    query: dict[str, Any] = {
        "queryType": "timeseries",
        "dataSource": TABLE,
        "intervals": [INTERVAL],
        "granularity": "hour",
        "aggregations": [{"type": "count", "name": "c"}],
    }
    field_name = rnd.choice(["intervals", "granularity", "zone", "origin", "filter"])
    if field_name == "intervals":
        query["intervals"] = [rnd.choice([f"{when}/2016", f"2015/{when}", "2016/2015", when, "/", ""])]
    elif field_name == "granularity":
        query["granularity"] = {"type": "period", "period": rnd.choice(BAD_PERIODS)}
    elif field_name == "zone":
        query["granularity"] = {"type": "period", "period": "P1D", "timeZone": rnd.choice(BAD_ZONES)}
    elif field_name == "origin":
        query["granularity"] = {"type": "duration", "duration": 3600000, "origin": when}
    else:
        query["filter"] = {"type": "interval", "dimension": "__time", "intervals": [f"{when}/2016"]}
    return native("bad timestamps", query, (400,))


def _ten_megabytes(rnd: random.Random) -> Hostile:
    size = rnd.choice([10_500_000, 1_200_000]) if rnd.random() < 0.7 else 9_000_000
    if rnd.random() < 0.5:
        values = ",".join(f"'v{i}'" for i in range(size // 9))
        statement = f"SELECT COUNT(*) FROM {TABLE} WHERE page IN ({values})"
        return sql("10 MB statements", statement, (400,))
    values_list = [f"v{i}" for i in range(size // 8)]
    query = {
        "queryType": "timeseries",
        "dataSource": TABLE,
        "intervals": [INTERVAL],
        "granularity": "all",
        "aggregations": [{"type": "count", "name": "c"}],
        "filter": {"type": "in", "dimension": "page", "values": values_list},
    }
    return native("10 MB statements", query, (200, 400))


def _native_nesting(rnd: random.Random) -> Hostile:
    """Filters, or query dataSources, nested 200 to 10,000 deep: the JSON is written as text (a
    client's JSON encoder recurses as deep as a parser would)."""
    depth = rnd.choice([200, 1000, 10_000])
    flat = {"queryType": "timeseries", "dataSource": TABLE, "intervals": [INTERVAL], "granularity": "all",
            "aggregations": [{"type": "count", "name": "c"}],
            "context": {"timeout": DEADLINE_MS}}  # fmt: skip
    head = json.dumps(flat)[:-1] + ", "
    if rnd.random() < 0.3:  # the same depth as a query dataSource chain
        head = json.dumps({k: v for k, v in flat.items() if k != "dataSource"})[:-1] + ", "
        opener = '{"type": "query", "query": {"queryType": "scan", "intervals": ' + json.dumps([INTERVAL])
        text = (
            head
            + '"dataSource": '
            + (opener + ', "dataSource": ') * depth
            + json.dumps(TABLE)
            + "}}" * depth
            + "}"
        )
    else:
        openers = ['{"type": "not", "field": ', '{"type": "and", "fields": [', '{"type": "or", "fields": [']
        chosen = [rnd.choice(openers) for _ in range(depth)]
        closers = ["}" if o.endswith(": ") else "]}" for o in reversed(chosen)]
        leaf = json.dumps({"type": "selector", "dimension": "page", "value": "x"})
        text = head + '"filter": ' + "".join(chosen) + leaf + "".join(closers) + "}"
    kwargs = {"content": text.encode(), "headers": {"Content-Type": "application/json"}}
    return Hostile("native nesting", kwargs, (400,), path=NATIVE_PATH, deadline_s=DEADLINE_MS / 1000)


GUARDRAIL_CATEGORIES: dict[str, Callable[[random.Random], Hostile]] = {
    "cross joins": _cross_join,
    "recursion": _recursion,
    "huge literals": _huge_literal,
    "bad regexes": _bad_regex,
    "bad timestamps": _bad_timestamp,
    "10 MB statements": _ten_megabytes,
    "native nesting": _native_nesting,
}
# per run at most this many of a category whose requests are each heavy to send or to refuse
HEAVY = {"10 MB statements": 3, "cross joins": 6}
