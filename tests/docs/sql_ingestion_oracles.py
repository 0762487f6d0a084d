"""Independent answers for docs/sql-ingestion.md's outputs: DuckDB over the wikipedia sample and
over the rows the page's statements hold, and the rules the page states for what is not data (a
task's id from its sqlQueryId, Druid's refusal)."""

from __future__ import annotations

import csv
import io
import json
import re
from functools import cache

from tests.docs.oracles import csv_lines, db, doc_file, one, rows

RUN = ("state", "dataSource", "rows", "segments")  # the columns the page keeps of `strata sql`'s line


@cache
def pageviews() -> str:
    """The CSV rows the page's `inline` statement holds, as a DuckDB table."""
    query = json.loads(doc_file("sql-ingestion.md", "pageviews-sql.json"))["query"]
    match = re.search(r"data => '(.*?)', format => 'csv'", query, re.S)
    assert match, query
    header, *lines = list(csv.reader(io.StringIO(match.group(1).replace("''", "'"))))
    db().execute("CREATE TABLE pageviews_sql (ts TIMESTAMPTZ, page VARCHAR, country VARCHAR, views BIGINT)")
    db().executemany("INSERT INTO pageviews_sql VALUES (?, ?, ?, ?)", lines)
    assert header == ["ts", "page", "country", "views"]
    return "pageviews_sql"


def _wiki_days() -> int:
    return int(one("SELECT COUNT(DISTINCT CAST(time AS DATE)) FROM wiki"))


def tutorial(shown: str) -> str:
    """Every sample row read, a day segment per day."""
    return csv_lines(RUN, ("SUCCESS", "wikipedia_sql", one("SELECT COUNT(*) FROM wiki"), _wiki_days()))


def top_channels(shown: str) -> str:
    got = rows("SELECT channel, COUNT(*) FROM wiki GROUP BY 1 ORDER BY 2 DESC LIMIT 3")
    return csv_lines(("channel", "EXPR$1"), *got)


def report(shown: str) -> str:
    """The report's status, the rows the statement holds, a segment per day."""
    n, days = rows(f"SELECT COUNT(*), COUNT(DISTINCT CAST(ts AS DATE)) FROM {pageviews()}")[0]
    return f"SUCCESS {n} {days}"


def _second_day() -> str:
    return f"CAST(ts AS DATE) = (SELECT MAX(CAST(ts AS DATE)) FROM {pageviews()})"


def replaced(shown: str) -> str:
    """The REPLACE reads the second day's rows (its OVERWRITE chunk) and writes that one day."""
    return csv_lines(
        RUN, ("SUCCESS", "pageviews_sql", one(f"SELECT COUNT(*) FROM {pageviews()} WHERE {_second_day()}"), 1)
    )


def replaced_days(shown: str) -> str:
    """The first day as inserted, the second day without its rows under 5 views."""
    got = rows(f"SELECT strftime(CAST(ts AS DATE), '%Y-%m-%dT00:00:00.000Z'), COUNT(*), SUM(views) FROM {pageviews()} "
               f"WHERE NOT ({_second_day()}) OR views >= 5 GROUP BY 1 ORDER BY 1")  # fmt: skip
    return csv_lines(("day", "pages", "views"), *got)


def rollup_run(shown: str) -> str:
    return csv_lines(RUN, ("SUCCESS", "wikipedia_hourly_sql", one("SELECT COUNT(*) FROM wiki"), _wiki_days()))


def rollup_rows(shown: str) -> str:
    """A stored row per (hour, channel); the edits and added characters of every sample row."""
    got = rows("SELECT COUNT(DISTINCT (date_trunc('hour', time), channel)), COUNT(*), SUM(added) FROM wiki")
    return csv_lines(("stored_rows", "edits", "added"), *got)
