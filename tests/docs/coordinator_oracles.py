"""Independent answers for docs/coordinator.md's outputs: DuckDB over the rows the page writes
(`pageviews.json`), and the rules the page states for what is not data (ids given, Druid's shapes)."""

from __future__ import annotations

from functools import cache

from tests.docs.oracles import Oracle, db, doc_file, rows, scratch


@cache
def pageviews() -> str:
    path = scratch() / "pageviews.json"
    path.write_text(doc_file("coordinator.md", "pageviews.json"))
    db().execute(f"CREATE TABLE pageviews AS SELECT * FROM read_json('{path}', "
                 "columns={ts: 'TIMESTAMPTZ', page: 'VARCHAR', country: 'VARCHAR', views: 'BIGINT'})")  # fmt: skip
    return "pageviews"


def days() -> list[str]:
    """The days the rows fall on, ISO dates, oldest first: the task's day segments."""
    return [str(d) for (d,) in rows(f"SELECT DISTINCT CAST(ts AS DATE) FROM {pageviews()} ORDER BY 1")]


def report(shown: str) -> str:
    count = rows(f"SELECT COUNT(*) FROM {pageviews()}")[0][0]
    return f"COMPLETED {count} {len(days())}"  # every row processed, a segment per day


def per_day(shown: str) -> str:
    got = rows(f"SELECT CAST(ts AS DATE), COUNT(*), SUM(views) FROM {pageviews()} GROUP BY 1 ORDER BY 1")
    return "\n".join(["day,edits,views", *(f"{d}T00:00:00.000Z,{n},{v}" for d, n, v in got)])


def intervals(shown: str) -> list[str]:
    """Druid lists a data source's intervals newest first."""
    return [f"{d}T00:00:00.000Z/{_next(d)}T00:00:00.000Z" for d in reversed(days())]


def _next(day: str) -> str:
    return str(rows(f"SELECT CAST(DATE '{day}' + INTERVAL 1 DAY AS DATE)")[0][0])


def marked(interval_days: set[str]) -> Oracle:
    """`numChangedSegments` of a mark over these days: one day segment each."""
    return lambda shown: {"numChangedSegments": len([d for d in days() if d in interval_days])}


def first_day(shown: str) -> str:
    n, v = rows(
        f"SELECT COUNT(*), SUM(views) FROM {pageviews()} WHERE CAST(ts AS DATE) = DATE '{days()[0]}'"
    )[0]
    return f"{n},{v}"


def killed(shown: str) -> str:
    n = len(days())  # both days unused, then killed in one batch (batchSize 100)
    return f"{{'numSegmentsKilled': {n}, 'numBatchesProcessed': 1, 'numSegmentsMarkedAsUnused': 0}}"


# Druid's serialization of the posted rules (RulesResource answers the rules re-serialized): the
# interval normalized, the load rules' defaults written out (tieredReplicants {_default_tier: 2}
# when not given, useDefaultTierForNull true)
RULES_AS_DRUID_WRITES_THEM = [
    {
        "type": "loadByInterval",
        "interval": "2015-09-01T00:00:00.000Z/2015-10-01T00:00:00.000Z",
        "tieredReplicants": {"_default_tier": 1},
        "useDefaultTierForNull": True,
    },
    {"type": "loadForever", "tieredReplicants": {"_default_tier": 2}, "useDefaultTierForNull": True},
]


def hours() -> int:
    """The distinct hours the rows fall in: the hourly task's segments."""
    return int(rows(f"SELECT COUNT(DISTINCT date_trunc('hour', ts)) FROM {pageviews()}")[0][0])


def compact_report(shown: str) -> str:
    return f"COMPLETED {hours()} {len(days())}"  # every hourly segment read, a day segment per day


def totals(shown: str) -> str:
    n, v, pages = rows(f"SELECT COUNT(*), SUM(views), COUNT(DISTINCT page) FROM {pageviews()}")[0]
    return f"{n},{v},{pages}"


def auto_compaction_status(shown: str) -> str:
    return f"{len(days())} 0 0"  # the hand-compacted days are what the config asks: compacted
