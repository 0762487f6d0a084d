"""The soak's checked queries: native and SQL queries over the wikipedia segments with random
parameters, each with the answer DuckDB computes over the same Parquet files (the raw rows: the
sample is not rolled up), written apart from Strata's engine. Answers are compared as sets of
rows with floats to 1e-9, so order only counts where the query fixes it."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from strata.storage import open_metadata_store

CHANNELS = [
    "#en.wikipedia",
    "#de.wikipedia",
    "#fr.wikipedia",
    "#it.wikipedia",
    "#ja.wikipedia",
    "#ru.wikipedia",
    "#es.wikipedia",
    "#zh.wikipedia",
    "#ca.wikipedia",
    "#nope",
]
DAY = "2015-09-12"


@dataclass(frozen=True)
class Checked:
    """A query to send and the rows it must come back with."""

    name: str
    path: str
    body: dict[str, Any]
    expected: list[tuple[Any, ...]]
    rows_of: Callable[[Any], list[tuple[Any, ...]]]  # the answer's rows, in the oracle's shape
    ordered: bool = False


class Oracle:
    """DuckDB over the segments' Parquet files (a table `raw`)."""

    def __init__(self, metadata: Path, data_source: str = "wikipedia"):
        store = open_metadata_store(metadata)
        try:
            files = [str(s.load_spec["path"]) for s in store.used_segments() if s.data_source == data_source]
        finally:
            store.close()
        listed = ", ".join(f"'{f}'" for f in files)
        self.conn = duckdb.connect()
        self.conn.execute("SET TimeZone='UTC'")
        self.conn.execute(f"CREATE VIEW raw AS SELECT * FROM read_parquet([{listed}])")
        self.files = len(files)

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return [tuple(r) for r in self.conn.execute(sql, list(params)).fetchall()]


def window(rnd: random.Random) -> tuple[int, int]:
    start = rnd.randrange(0, 23)
    return start, rnd.randrange(start + 1, 25)


def iso(hour: int) -> str:
    return f"{DAY}T{hour:02d}:00:00.000Z" if hour < 24 else "2015-09-13T00:00:00.000Z"


def _between(lo: int, hi: int) -> str:
    start, end = (iso(h)[:19].replace("T", " ") for h in (lo, hi))
    return f"__time >= TIMESTAMP '{start}' AND __time < TIMESTAMP '{end}'"


def timeseries(oracle: Oracle, rnd: random.Random) -> Checked:
    lo, hi = window(rnd)
    channel = rnd.choice(CHANNELS)
    body = {
        "queryType": "timeseries",
        "dataSource": "wikipedia",
        "intervals": [f"{iso(lo)}/{iso(hi)}"],
        "granularity": "hour",
        "filter": {"type": "selector", "dimension": "channel", "value": channel},
        "aggregations": [
            {"type": "count", "name": "c"},
            {"type": "longSum", "name": "a", "fieldName": "added"},
        ],
        "context": {"skipEmptyBuckets": True},
    }
    expected = oracle.rows(
        "SELECT strftime(date_trunc('hour', __time), '%Y-%m-%dT%H:00:00.000Z'), count(*), sum(added) "
        "FROM raw "
        f"WHERE channel = ? AND {_between(lo, hi)} GROUP BY 1 ORDER BY 1",
        [channel],
    )
    return Checked(
        "timeseries",
        "/druid/v2/",
        body,
        expected,
        lambda r: [(b["timestamp"], b["result"]["c"], b["result"]["a"]) for b in r],
        ordered=True,
    )


def topn_all_channels(oracle: Oracle, rnd: random.Random) -> Checked:
    lo, hi = window(rnd)
    body = {
        "queryType": "topN",
        "dataSource": "wikipedia",
        "intervals": [f"{iso(lo)}/{iso(hi)}"],
        "granularity": "all",
        "dimension": "channel",
        "metric": "c",
        "threshold": 1000,
        "aggregations": [
            {"type": "count", "name": "c"},
            {"type": "longSum", "name": "d", "fieldName": "delta"},
        ],
    }
    expected = oracle.rows(
        f"SELECT channel, count(*), sum(delta) FROM raw WHERE {_between(lo, hi)} GROUP BY 1"
    )
    return Checked(
        "topN",
        "/druid/v2/",
        body,
        expected,
        lambda r: [(x["channel"], x["c"], x["d"]) for b in r for x in b["result"]],
    )


def group_by(oracle: Oracle, rnd: random.Random) -> Checked:
    lo, hi = window(rnd)
    body = {
        "queryType": "groupBy",
        "dataSource": "wikipedia",
        "intervals": [f"{iso(lo)}/{iso(hi)}"],
        "granularity": "all",
        "dimensions": ["isRobot", "namespace"],
        "filter": {"type": "not", "field": {"type": "null", "column": "countryName"}},
        "aggregations": [
            {"type": "count", "name": "c"},
            {"type": "longMax", "name": "m", "fieldName": "added"},
        ],
    }
    expected = oracle.rows(
        "SELECT isRobot, namespace, count(*), max(added) FROM raw "
        f"WHERE countryName IS NOT NULL AND {_between(lo, hi)} GROUP BY 1, 2"
    )
    return Checked(
        "groupBy",
        "/druid/v2/",
        body,
        expected,
        lambda r: [
            (e["event"]["isRobot"], e["event"]["namespace"], e["event"]["c"], e["event"]["m"]) for e in r
        ],
    )


def scan(oracle: Oracle, rnd: random.Random) -> Checked:
    hour = rnd.randrange(0, 24)
    body = {
        "queryType": "scan",
        "dataSource": "wikipedia",
        "intervals": [f"{iso(hour)}/{iso(hour + 1)}"],
        "columns": ["page", "added"],
        "filter": {"type": "like", "dimension": "page", "pattern": "User%"},
        "resultFormat": "compactedList",
    }
    expected = oracle.rows(
        f"SELECT page, added FROM raw WHERE page LIKE 'User%' AND {_between(hour, hour + 1)}"
    )
    return Checked("scan", "/druid/v2/", body, expected, lambda r: [tuple(e) for b in r for e in b["events"]])


def sql_grouped(oracle: Oracle, rnd: random.Random) -> Checked:
    lo, hi = window(rnd)
    floor = rnd.choice([0, 10, 100])
    statement = (
        f"SELECT channel, COUNT(*) AS c, SUM(added) AS a FROM wikipedia WHERE added >= {floor} "
        f"AND {_between(lo, hi)} GROUP BY channel"
    )
    expected = oracle.rows(
        f"SELECT channel, count(*), sum(added) FROM raw WHERE added >= {floor} "
        f"AND {_between(lo, hi)} GROUP BY channel"
    )
    return Checked(
        "sql groupBy",
        "/druid/v2/sql",
        {"query": statement},
        expected,
        lambda r: [(x["channel"], x["c"], x["a"]) for x in r],
    )


def sql_count(oracle: Oracle, rnd: random.Random) -> Checked:
    channel = rnd.choice(CHANNELS)
    statement = f"SELECT COUNT(*) AS c, MIN(delta) AS lo FROM wikipedia WHERE channel = '{channel}'"
    expected = oracle.rows("SELECT count(*), min(delta) FROM raw WHERE channel = ?", [channel])
    return Checked(
        "sql count", "/druid/v2/sql", {"query": statement}, expected, lambda r: [(x["c"], x["lo"]) for x in r]
    )


CHECKED: list[Callable[[Oracle, random.Random], Checked]] = [
    timeseries,
    topn_all_channels,
    group_by,
    scan,
    sql_grouped,
    sql_count,
]


def same_rows(got: list[tuple[Any, ...]], want: list[tuple[Any, ...]], ordered: bool) -> bool:
    a, b = [_canon(r) for r in got], [_canon(r) for r in want]
    return a == b if ordered else sorted(a, key=repr) == sorted(b, key=repr)


def _canon(row: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(round(v, 9) if isinstance(v, float) else v for v in row)
