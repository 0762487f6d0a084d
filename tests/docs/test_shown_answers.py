"""Every output shown in README.md and docs/*.md is also what an independent oracle says.

`test_readme_commands.py` checks that Strata prints what the docs show; this module checks that
what the docs show is right: numbers come from DuckDB over the raw rows (Druid's wikipedia sample,
the files the docs write, the events they push), written here apart from Strata. Outputs that are
not data (Druid's error bodies, metric names, cache counters) are checked against the rule the
docs state for them. Each shown output must have exactly one oracle, found by a snippet of its
command, so a new example cannot be added without one.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

import pytest

from tests.docs import coordinator_oracles as coordinator
from tests.docs import sql_ingestion_oracles as sql_ingestion
from tests.docs.extract import commands, fenced_blocks, python_expected
from tests.docs.oracles import (
    Oracle,
    cache_gauges,
    channel_array,
    clicks_by_country,
    clicks_daily,
    clicks_fr_rows,
    clicks_fr_summary,
    clicks_hours,
    clicks_rollup_summary,
    closed_bucket,
    console_segments,
    druid_error,
    expect,
    explain_topn,
    first_hour_count,
    first_push,
    fr_over_100,
    historical_types,
    hourly_timeseries,
    languages,
    late_days,
    live_rows,
    long_pages,
    los_angeles,
    lru_counts,
    max_ingested,
    one,
    pari_cities,
    paris_scan,
    parse_allowed,
    parse_failure,
    readme_channels,
    readme_countries,
    readme_de,
    readme_deleted_by_hour,
    readme_dropped,
    readme_fr,
    readme_lang,
    readme_live,
    readme_live_hours,
    readme_my_edits,
    readme_my_edits_hours,
    readme_push,
    readme_segments,
    readme_spark_tour,
    readme_sql_top_pages,
    readme_tokyo,
    readme_top_pages,
    realtime_event_gauges,
    realtime_ingest_types,
    retried_push,
    search_pari,
    security_users,
    spark_totals,
    tagged_types,
    time_boundary,
    tokyo_days,
    top_countries,
    total_count,
    wikipedia_name,
)

# (document, a snippet of the command) -> one oracle per output of the commands it matches, in order
ORACLES: dict[tuple[str, str], list[Oracle]] = {
    ("README.md", "druid/v2/datasources"): [lambda s: [wikipedia_name()]],
    ("README.md", '"metric": "edits", "threshold": 3,'): [readme_top_pages],
    ("README.md", "SUM(deleted)"): [readme_deleted_by_hour],
    ("README.md", "UPPER(SUBSTRING"): [readme_lang],
    ("README.md", 'csv -e "SELECT channel, COUNT(*) AS edits'): [readme_channels],
    ("README.md", "FROM wikipedia_live"): [readme_live],
    ("query-api.md", "cityName = 'Paris'"): [
        lambda s: str(one("SELECT COUNT(*) FROM wiki WHERE cityName = 'Paris'"))
    ],
    ("README.md", "added > 100"): [readme_spark_tour],
    ("README.md", "FROM wikipedia_fr"): [readme_fr],
    ("README.md", "FROM my_edits GROUP BY"): [readme_my_edits],
    ("realtime.md", "# TYPE druid_ingest_"): [realtime_ingest_types],
    ("ingestion.md", "segments list --datasource wiki --json"): [
        readme_segments(False),
        readme_segments(True),
    ],
    ("ingestion.md", "segments drop --datasource wiki"): [readme_dropped("dropped (marked unused)")],
    ("ingestion.md", "segments restore --datasource wiki"): [readme_dropped("restored (marked used)")],
    # overlapping intervals: each row once
    ("query-api.md", "2015-09-12T00:00/2015-09-12T12:00"): [total_count],
    ("query-api.md", "ORDER BY Edits DESC LIMIT 3"): [readme_sql_top_pages],
    ("query-api.md", "countryName IS NOT NULL GROUP BY 1"): [readme_countries],
    ("query-api.md", "cityName = 'Tokyo'"): [readme_tokyo],
    ("query-api.md", "channel = '#de.wikipedia'"): [readme_de],
    ("historical.md", "8085/druid/v2/"): [total_count],  # a historical alone serves every used segment
    ("realtime.md", "push/clicks_live -d"): [readme_push],
    ("realtime.md", '"dataSource": "clicks_live"'): [readme_live_hours],
    ("broker.md", "8090 --format csv --no-header"): [lambda s: one("SELECT COUNT(*) FROM wiki")],
    ("query-api.md", '"granularity": "hour"'): [hourly_timeseries],
    ("query-api.md", '"dimension": "countryName"'): [top_countries],
    ("query-api.md", '"name": "lang"'): [languages],
    ("query-api.md", '"queryType": "scan"'): [paris_scan],
    ("query-api.md", '"queryType": "search"'): [search_pari],
    ("query-api.md", '"queryType": "timeBoundary"'): [time_boundary],
    ("query-api.md", '"queryType": "dataSourceMetadata"'): [max_ingested],
    ("query-api.md", "America/Los_Angeles"): [los_angeles],
    ("query-api.md", "strlen(page) > 40"): [long_pages],
    ("query-api.md", '"wikipedia", "granularity": "all"'): [
        druid_error(400, "INVALID_INPUT", "invalidInput", "org.apache.druid.error.DruidException")
    ],
    ("query-api.md", '"javascript"'): [
        druid_error(
            501, "UNSUPPORTED", "legacyQueryException", "org.apache.druid.query.QueryUnsupportedException"
        )
    ],
    # issue 36's bounds: refused before any work, and the three scans' 117,732 rows past maxSubqueryRows
    ("query-api.md", "WITH RECURSIVE"): [
        druid_error(400, "INVALID_INPUT", "invalidInput", "org.apache.druid.error.DruidException")
    ],
    ("query-api.md", "wikipedia, wikipedia, wikipedia"): [
        druid_error(
            400,
            "CAPACITY_EXCEEDED",
            "legacyQueryException",
            "org.apache.druid.query.ResourceLimitExceededException",
        )
    ],
    # the rule: a pattern no engine compiles is the user's input error, refused on the broker
    ("query-api.md", '"pattern": "((("'): [
        druid_error(400, "INVALID_INPUT", "invalidInput", "org.apache.druid.error.DruidException")
    ],
    ("query-api.md", '"parameters"'): [fr_over_100],
    ("query-api.md", '"sqlTypesHeader": true'): [channel_array],
    ("query-api.md", "EXPLAIN PLAN FOR"): [explain_topn],
    ("query-api.md", "Asia/Tokyo"): [tokyo_days],
    ("query-api.md", "LIKE 'Pari%'"): [pari_cities],
    # the SQL API's rule: an unknown table is INVALID_INPUT; the client prints it in one line, exit 1
    ("query-api.md", "FROM nope"): [expect("Error: INVALID_INPUT: Object 'nope' not found\nexit 1")],
    ("realtime.md", '"added": 1}]\''): [first_push],
    ("realtime.md", '"added": 5}]\''): [retried_push],
    ("realtime.md", "stored_rows FROM edits_live GROUP BY 1"): [live_rows(False), live_rows(True)],
    ("realtime.md", "10:05:00Z"): [closed_bucket],
    ("realtime.md", "'not json'"): [
        druid_error(400, "INVALID_INPUT", "invalidInput", "org.apache.druid.error.DruidException")
    ],
    ("realtime.md", "push/wikipedia -d"): [
        druid_error(404, "NOT_FOUND", "notFound", "org.apache.druid.error.DruidException")
    ],
    ("realtime.md", "strata_realtime_events{"): [realtime_event_gauges],
    ("cache.md", 's["kind"]'): [lru_counts],
    ("cache.md", "If-None-Match"): [expect("304")],  # the rule: an unchanged ETag is 304 Not Modified
    ("cache.md", "druid_query_cache_total_"): [cache_gauges],
    ("cache.md", '-d "$query"'): [total_count],
    ("cache.md", '-d "${query/'): [first_hour_count],
    # the breaker's rule: closed while memcached answers, opened by the first failure after the kill
    ("cache.md", '["breakers"]'): [
        expect("{'127.0.0.1:11211': {'state': 'closed', 'trips': 0}}"),
        expect("{'127.0.0.1:11211': {'state': 'open', 'trips': 1}}"),
    ],
    ("cache.md", "memcached is gone"): [expect("memcached is gone")],  # not data: an echo once it stopped
    ("ingestion.md", "--datasource clicks --metadata"): [clicks_hours],
    ("ingestion.md", "AS rows_"): [clicks_by_country],
    ("ingestion.md", "clicks-index.json --deep-storage"): [clicks_rollup_summary],
    ("ingestion.md", "FROM clicks_daily"): [clicks_daily],
    # the refusal rule: a jq flatten field is refused by name, nothing ingested, exit 1
    ("ingestion.md", "flattened-index.json --deep"): [
        expect(
            "strata ingest: error: flattenSpec field 'city': 'jq' fields are not supported; write the field as "
            "a 'path'\nexit 1"
        )
    ],
    ("ingestion.md", "filtered-index.json --deep"): [clicks_fr_summary],
    ("ingestion.md", "FROM clicks_fr ORDER BY"): [clicks_fr_rows],
    ("ingestion.md", "read_segment_facts(segment.load_spec"): [tagged_types],
    ("ingestion.md", "--timestamp-column ts \\\n"): [parse_failure],
    ("ingestion.md", "--max-parse-exceptions 1"): [parse_allowed],
    ("ingestion.md", "late_clicks --metadata quickstart/metadata.db --json"): [
        expect(0),
        expect(0),
    ],  # none used
    ("ingestion.md", "segments drop --datasource late_clicks"): [late_days],
    ("ingestion.md", "--all --metadata"): [lambda s: 1],  # the one dropped segment, kept as unused
    ("operations.md", "server_type = 'historical'"): [expect(3)],  # the quickstart's two and one added
    ("operations.md", "COUNT(*) FROM wikipedia"): [lambda s: one("SELECT COUNT(*) FROM wiki")],
    ("operations.md", "# TYPE druid_"): [historical_types],
    ("spark.md", "wikipedia_hourly"): [spark_totals],
    # the console page is served; the quickstart's day segments, all available, none overshadowed;
    # the quickstart's three kinds of server
    ("console.md", "/console/"): [expect(200)],
    ("console.md", "SUM(is_overshadowed)"): [console_segments],
    ("console.md", "/status/cluster"): [expect("['broker', 'historical', 'realtime']")],
    ("security.md", "metadata.db users"): [security_users],  # the users and roles its commands made
    # coordinator.md: the task's id is the one its spec gives; a finished task's status in Druid's words
    ("coordinator.md", "-d @pageviews-task.json"): [expect({"task": "pageviews-1"})],
    ("coordinator.md", 'print(s["statusCode"]'): [expect("SUCCESS NONE index_parallel pageviews None")],
    ("coordinator.md", 'r["segmentsPublished"]'): [coordinator.report],
    ("coordinator.md", "TIME_FLOOR(__time, 'P1D')"): [coordinator.per_day],
    ("coordinator.md", "state=complete"): [expect("[('pageviews-1', 'SUCCESS')]")],
    (
        "coordinator.md",
        "curl -s http://127.0.0.1:8081/druid/coordinator/v1/datasources/pageviews/intervals",
    ): [coordinator.intervals],
    ("coordinator.md", "/markUnused -d"): [coordinator.marked({"2015-09-13"})],
    ("coordinator.md", 'SUM(views) FROM pageviews"'): [coordinator.first_day],
    ("coordinator.md", "/markUsed -d"): [coordinator.marked({"2015-09-13"})],
    ("coordinator.md", "-XDELETE http://127.0.0.1:8081/druid/coordinator/v1/datasources/pageviews\n"): [
        lambda s: {"numChangedSegments": len(coordinator.days())}
    ],
    ("coordinator.md", "%{http_code}"): [expect(200)],  # the rule: the kill task is submitted, no body
    ("coordinator.md", "killUnusedSegments"): [coordinator.killed],
    ("coordinator.md", "--datasource pageviews --all"): [expect(0)],  # nothing left, used or unused
    # lookups.md: the rule `strata lookups` states — each command names what it did; `list` and `get`
    # show what the page configured (lookups.json, and the first block's `country`); once loaded, no
    # node is pending
    ("lookups.md", "set lookups.json"): [expect("set __default/app_owner")],
    ("lookups.md", "8081 list"): [
        expect(
            "TIER       LOOKUP     VERSION  TYPE\n__default  app_owner  v1       map\n__default  country    v1       map"
        )
    ],
    ("lookups.md", "get __default app_owner"): [
        expect(
            {
                "version": "v1",
                "lookupExtractorFactory": {"type": "map", "map": {"app1": "alice", "app2": "bob"}},
            }
        )
    ],
    ("lookups.md", "status\n# __default"): [expect("__default/app_owner: loaded\n__default/country: loaded")],
    ("lookups.md", "delete __default app_owner"): [expect("deleted __default/app_owner")],
    # coordinator.md's rules, compaction and auto-compaction: Druid's answers and serializations
    ("coordinator.md", "%{response_code}"): [expect(200)] * 4,  # a change answers 200, no body
    ("coordinator.md", "v1/rules/pageviews\n"): [expect(coordinator.RULES_AS_DRUID_WRITES_THEM)],
    ("coordinator.md", 'e["auditInfo"]["comment"]'): [expect("rules pageviews ops / September once")],
    ("coordinator.md", "-d @pageviews-hourly-task.json"): [expect({"task": "pageviews-hourly"})],
    ("coordinator.md", "-d @pageviews-compact.json"): [expect({"task": "pageviews-compact-1"})],
    ("coordinator.md", 'p["compaction"]'): [coordinator.compact_report],
    ("coordinator.md", "COUNT(DISTINCT page) FROM pageviews"): [coordinator.totals],
    ("coordinator.md", 'c["taskPriority"]'): [
        expect("25 PT0S 100000000000000 {'segmentGranularity': 'DAY'}")
    ],
    ("coordinator.md", 's["intervalCountCompacted"]'): [coordinator.auto_compaction_status],
    # sql-ingestion.md: a task's id is query-<sqlQueryId>; a finished task's status in Druid's words;
    # a statement without PARTITIONED BY is refused with Druid's message, inside a SqlTaskStatus
    ("sql-ingestion.md", "< wikipedia-sql.sql"): [sql_ingestion.tutorial],
    ("sql-ingestion.md", 'FROM "wikipedia_sql" GROUP BY channel'): [sql_ingestion.top_channels],
    ("sql-ingestion.md", "-d @pageviews-sql.json"): [
        expect({"taskId": "query-pageviews-sql-1", "state": "RUNNING"})
    ],
    ("sql-ingestion.md", 'print(s["statusCode"]'): [expect("SUCCESS query_controller pageviews_sql None")],
    ("sql-ingestion.md", '["multiStageQuery"]'): [sql_ingestion.report],
    ("sql-ingestion.md", "INSERT INTO pageviews_sql SELECT * FROM wikipedia"): [
        expect(
            "FAILED INVALID_INPUT Operation [INSERT] requires a PARTITIONED BY to be explicitly defined, "
            "but none was found."
        )
    ],
    ("sql-ingestion.md", "views >= 5 PARTITIONED BY DAY"): [sql_ingestion.replaced],
    ("sql-ingestion.md", "AS pages, SUM(views)"): [sql_ingestion.replaced_days],
    ("sql-ingestion.md", "SET finalizeAggregations"): [sql_ingestion.rollup_run],
    ("sql-ingestion.md", "AS stored_rows"): [sql_ingestion.rollup_rows],
}


def shown_outputs() -> list[tuple[str, str, str]]:
    """(document, the command followed by its shown output, the shown text), in document order."""
    out = []
    for block in fenced_blocks():
        if not block.tested:
            continue
        if block.language == "python":
            expected = python_expected(block)
            if expected is not None:
                out.append((block.source, block.body, expected))
            continue
        for command in commands(block):
            if command.expected:
                shown = "\n".join(command.expected)
                out.append((block.source, command.text + "\n# " + "\n# ".join(command.expected), shown))
    return out


def _key(doc: str, text: str) -> tuple[str, str]:
    keys = [(d, k) for (d, k) in ORACLES if d == doc and k in text]
    assert len(keys) == 1, f"{doc}: {text[:300]!r} matches oracles {keys} (exactly one needed)"
    return keys[0]


def test_every_shown_output_has_its_oracles() -> None:
    seen: dict[tuple[str, str], int] = {}
    for doc, text, _shown in shown_outputs():
        key = _key(doc, text)
        seen[key] = seen.get(key, 0) + 1
    for key, oracles in ORACLES.items():
        assert seen.get(key, 0) == len(oracles), f"{key}: {len(oracles)} oracles, {seen.get(key, 0)} outputs"


def _with_position() -> list[tuple[str, str, str, int]]:
    counts: dict[tuple[str, str], int] = {}
    out = []
    for doc, text, shown in shown_outputs():
        key = _key(doc, text)
        out.append((doc, text, shown, counts.get(key, 0)))
        counts[key] = counts.get(key, 0) + 1
    return out


@pytest.mark.parametrize("item", _with_position(), ids=lambda i: f"{i[0]}:{i[1].splitlines()[0][:50]}")
def test_shown_output_is_the_oracles_answer(item: tuple[str, str, str, int]) -> None:
    doc, text, shown, position = item
    want = ORACLES[_key(doc, text)][position](shown)
    if want is None:
        return  # the oracle checked the shown text itself
    try:
        got: Any = json.loads(shown)
    except json.JSONDecodeError:
        got = shown
    if isinstance(want, str) and not isinstance(got, str):
        with contextlib.suppress(json.JSONDecodeError):
            want = json.loads(want)
    assert got == want, f"{doc}: the docs show\n{shown}\nbut the oracle says\n{want}\nfor\n{text[:500]}"


def test_the_tour_waits_for_as_many_segments_as_it_ingests() -> None:
    """The tour's wait loop is not a shown output, but a wrong count would hang it: the oracle's."""
    waits = [c.text for b in fenced_blocks() if b.source == "README.md" and b.tested for c in commands(b)
             if "datasource = 'my_edits'" in c.text]  # fmt: skip
    assert len(waits) == 1 and f"grep -qx {readme_my_edits_hours()};" in waits[0], waits
