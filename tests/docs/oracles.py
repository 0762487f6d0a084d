"""Independent answers for the outputs the docs show: DuckDB over the raw rows (Druid's wikipedia
sample, the files the docs write, the events they push), written apart from Strata, and the rules
the docs state for outputs that are not data (Druid's error bodies, metric names, cache counters).
Used by `test_shown_answers.py`."""

from __future__ import annotations

import datetime as dt
import json
import re
import tempfile
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import duckdb

from strata.data import WIKIPEDIA_INDEX_SPEC, WIKIPEDIA_SAMPLE
from tests.docs.extract import DOCUMENTS, fenced_blocks

Oracle = Callable[[str], Any]  # the shown text -> the expected value (None: checked inside)


@cache
def db() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.execute(f"CREATE TABLE wiki AS SELECT * FROM read_json_auto('{WIKIPEDIA_SAMPLE}')")
    return con


def rows(sql: str) -> list[tuple[Any, ...]]:
    return db().execute(sql).fetchall()


def one(sql: str) -> Any:
    return rows(sql)[0][0]


def iso(value: dt.datetime, offset: str = "Z") -> str:
    """Druid's timestamp text: milliseconds, UTC as Z (or the given offset)."""
    return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}" + offset


def min_time() -> str:
    return iso(one("SELECT MIN(time) FROM wiki"))


def doc_file(doc: str, name: str) -> str:
    """The contents of a file a doc writes with `cat > NAME <<'EOF'` (or `printf '...' > NAME`)."""
    for block in fenced_blocks([d for d in DOCUMENTS if d.name == doc]):
        if match := re.search(rf"cat > {re.escape(name)} <<'EOF'\n(.*?)\nEOF", block.body, re.S):
            return match.group(1) + "\n"
        if match := re.search(rf"printf '(.*?)' > {re.escape(name)}", block.body):
            return match.group(1).encode().decode("unicode_escape")
    raise AssertionError(f"{doc} writes no file {name}")


@cache
def scratch() -> Path:
    """A directory for the files the docs write, removed when the test process exits."""
    return Path(_SCRATCH.setdefault("dir", tempfile.TemporaryDirectory(prefix="strata-docs-oracle-")).name)


_SCRATCH: dict[str, tempfile.TemporaryDirectory[str]] = {}


@cache
def csv_table(doc: str, name: str) -> str:
    """A DuckDB relation over a csv file a doc writes: every column as text, `t` the parsed `ts`."""
    path = scratch() / name
    path.write_text(doc_file(doc, name))
    table = re.sub(r"\W", "_", name)
    db().execute(f"CREATE TABLE {table} AS SELECT * FROM read_csv('{path}', header=true, all_varchar=true)")
    return f"(SELECT *, TRY_CAST(ts AS TIMESTAMPTZ) AS t FROM {table})"


def csv_lines(*lines: Any) -> str:
    return "\n".join(",".join(str(v) for v in line) for line in lines)


def druid_error(status: int, category: str, error_code: str, klass: str) -> Oracle:
    """The shown text is Druid's error body (every field Druid sends) with the status the docs give."""

    def check(shown: str) -> None:
        body_text, code = shown.rsplit("\n", 1)
        body = json.loads(body_text)
        assert set(body) == {"error", "errorMessage", "errorClass", "host", "errorCode", "persona",
                             "category", "context"}, body  # fmt: skip
        assert (int(code), body["category"], body["errorCode"], body["errorClass"]) == (
            status, category, error_code, klass)  # fmt: skip
        assert body["host"].startswith("127.0.0.1:")

    return check


def expect(value: Any) -> Oracle:
    return lambda shown: value


# -- README ----------------------------------------------------------------------------------------


def readme_top_pages(shown: str) -> Any:
    top = rows("SELECT page, COUNT(*) FROM wiki GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 3")
    return [{"timestamp": min_time(), "result": [{"page": p, "edits": n} for p, n in top]}]


def readme_deleted_by_hour(shown: str) -> Any:
    got = rows("SELECT date_trunc('hour', time), SUM(deleted) FROM wiki GROUP BY 1 ORDER BY 1 LIMIT 3")
    return [{"h": iso(h), "deleted": n} for h, n in got]


def readme_lang(shown: str) -> Any:
    got = rows(
        "SELECT upper(substring(channel, 2, 2)), COUNT(*) FROM wiki GROUP BY 1 ORDER BY 2 DESC LIMIT 2"
    )
    return [{"lang": lang, "edits": n} for lang, n in got]


def readme_channels(shown: str) -> str:
    got = rows("SELECT channel, COUNT(*) FROM wiki GROUP BY 1 ORDER BY 2 DESC LIMIT 3")
    return csv_lines(("channel", "edits"), *got)


def readme_live(shown: str) -> str:
    got = rows("SELECT page, COUNT(*), SUM(added) FROM (VALUES ('Main Page', 12), ('Hauptseite', 7)) e(page, added) "
               "GROUP BY 1 ORDER BY 1")  # fmt: skip
    return csv_lines(("page", "edits", "added"), *got)


def readme_sql_top_pages(shown: str) -> Any:
    top = rows("SELECT page, COUNT(*) FROM wiki GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 3")
    return [{"page": p, "Edits": n} for p, n in top]


def readme_countries(shown: str) -> str:
    got = rows(
        "SELECT countryName, COUNT(*) FROM wiki WHERE countryName IS NOT NULL GROUP BY 1 ORDER BY 2 DESC LIMIT 3"
    )
    return csv_lines(("countryName", "edits"), *got)


def readme_tokyo(shown: str) -> str:
    got = rows("SELECT time, page, added FROM wiki WHERE cityName = 'Tokyo' ORDER BY time LIMIT 2")
    return "\n".join(json.dumps({"__time": iso(t), "page": p, "added": a}, ensure_ascii=False, separators=(",", ":"))
                     for t, p, a in got)  # fmt: skip


def readme_de(shown: str) -> str:
    n, added = rows("SELECT COUNT(*), SUM(added) FROM wiki WHERE channel = '#de.wikipedia'")[0]
    return f"{n}\t{added}"


def readme_fr(shown: str) -> str:
    got = rows("SELECT COUNT(*), SUM(added) FROM wiki WHERE channel = '#fr.wikipedia' AND added > 100")
    return csv_lines(("edits", "added"), *got)


def realtime_ingest_types(shown: str) -> str:
    # Druid's real-time ingestion metrics (defaultMetrics.json) as its Prometheus emitter names them:
    # lower-cased, `/` as `_`, counters as _total
    druid = ["ingest/events/processed", "ingest/events/thrownAway", "ingest/events/unparseable",
             "ingest/persists/count", "ingest/handoff/count"]  # fmt: skip
    return "\n".join(f"# TYPE druid_{name.lower().replace('/', '_')}_total counter" for name in druid)


def readme_my_edits(shown: str) -> str:
    got = rows(f"SELECT page, COUNT(*) FROM {csv_table('README.md', 'my-edits.csv')} GROUP BY 1 ORDER BY 1")
    return csv_lines(("page", "edits"), *got)


def readme_my_edits_hours() -> int:
    """The hourly segments the README's tour waits for."""
    edits = csv_table("README.md", "my-edits.csv")
    return int(one(f"SELECT COUNT(DISTINCT date_trunc('hour', t)) FROM {edits}"))


def readme_spark_tour(shown: str) -> str:
    fr = one("SELECT COUNT(*) FROM wiki WHERE channel = '#fr.wikipedia' AND added > 100")
    channel, n = rows("SELECT channel, COUNT(*) FROM wiki GROUP BY 1 ORDER BY 2 DESC LIMIT 1")[0]
    return f"{fr}\nRow(channel='{channel}', edits={n})"


README_MAX_ROWS = 2  # the --max-rows-per-segment of ingestion.md's `wiki` example (once the README's)
README_DROPPED_HOUR = "2015-09-12T01:00:00Z"  # that example drops the segments of this hour


@cache
def readme_events() -> str:
    path = scratch() / "readme-events.json"
    path.write_text(doc_file("ingestion.md", "events.json"))
    db().execute(f"CREATE TABLE readme_events AS SELECT * FROM read_json('{path}', "
                 "columns={time: 'TIMESTAMPTZ', channel: 'VARCHAR', page: 'VARCHAR', added: 'BIGINT'})")  # fmt: skip
    return "readme_events"


def _readme_segments(where: str) -> int:
    """ceil(rows / max) dynamic partitions per hour of the README's events."""
    return int(one(f"SELECT COALESCE(SUM(CEIL(n / {README_MAX_ROWS})), 0) FROM (SELECT COUNT(*) AS n "
                   f"FROM {readme_events()} WHERE {where} GROUP BY date_trunc('hour', time))"))  # fmt: skip


def readme_segments(after_drop: bool) -> Oracle:
    hour = f"date_trunc('hour', time) = TIMESTAMPTZ '{README_DROPPED_HOUR}'"
    return lambda shown: _readme_segments(f"NOT ({hour})" if after_drop else "true")


def readme_dropped(verb: str) -> Oracle:
    hour = f"date_trunc('hour', time) = TIMESTAMPTZ '{README_DROPPED_HOUR}'"
    return lambda shown: f"{_readme_segments(hour)} segment(s) {verb}"


@cache
def readme_live_events() -> str:
    """The events realtime.md pushes to a real-time node on its own (from its curl command)."""
    realtime = [d for d in DOCUMENTS if d.name == "realtime.md"]
    text = next(b.body for b in fenced_blocks(realtime) if "push/clicks_live -d" in b.body)
    events = re.search(r"push/clicks_live -d '(\[.*?\])'", text, re.S)
    assert events, "realtime.md pushes no events to clicks_live"
    path = scratch() / "readme-live.json"
    path.write_text(events.group(1))
    db().execute(f"CREATE TABLE readme_live AS SELECT * FROM read_json('{path}', "
                 "columns={time: 'VARCHAR', page: 'VARCHAR'})")  # fmt: skip
    return "(SELECT *, TRY_CAST(time AS TIMESTAMPTZ) AS t FROM readme_live)"


def readme_push(shown: str) -> Any:
    received, parsed = rows(f"SELECT COUNT(*), COUNT(t) FROM {readme_live_events()}")[0]
    return {"eventCount": parsed, "received": received, "accepted": parsed, "unparseable": received - parsed,
            "thrownAway": 0, "parseErrors": [], "lsn": 1}  # fmt: skip


def readme_live_hours(shown: str) -> Any:
    got = rows(f"SELECT date_trunc('hour', t), COUNT(*) FROM {readme_live_events()} WHERE t IS NOT NULL "
               "GROUP BY 1 ORDER BY 1")  # fmt: skip
    return [{"timestamp": iso(h), "result": {"clicks": n}} for h, n in got]


# -- query-api.md ------------------------------------------------------------------------------


def hourly_timeseries(shown: str) -> Any:
    got = rows("SELECT date_trunc('hour', time), COUNT(*), SUM(added) FROM wiki "
               "WHERE time < '2015-09-12T03:00:00Z' GROUP BY 1 ORDER BY 1")  # fmt: skip
    return [{"timestamp": iso(h), "result": {"edits": n, "added": a}} for h, n, a in got]


def top_countries(shown: str) -> Any:
    got = rows("SELECT countryName, SUM(added), COUNT(*) FROM wiki WHERE countryName IS NOT NULL "
               "GROUP BY 1 ORDER BY 2 DESC LIMIT 3")  # fmt: skip
    result = [{"countryName": c, "added": a, "edits": n, "per_edit": a / n} for c, a, n in got]
    return [{"timestamp": min_time(), "result": result}]


def languages(shown: str) -> Any:
    got = rows("SELECT upper(substring(channel, 2, 2)) AS lang, COUNT(*) AS n FROM wiki GROUP BY 1 "
               "HAVING n > 2000 ORDER BY 2 DESC")  # fmt: skip
    return [{"version": "v1", "timestamp": "2015-09-12T00:00:00.000Z", "event": {"lang": lang, "edits": n}}
            for lang, n in got]  # fmt: skip


def paris_scan(shown: str) -> Any:
    got = rows("SELECT epoch_ms(time), page, added FROM wiki WHERE cityName = 'Paris' ORDER BY time LIMIT 2")
    return [list(r) for r in got]


def search_pari(shown: str) -> Any:
    got = rows(
        "SELECT cityName, COUNT(*) FROM wiki WHERE lower(cityName) LIKE '%pari%' GROUP BY 1 ORDER BY 1"
    )
    result = [{"dimension": "cityName", "value": v, "count": n} for v, n in got]
    return [{"timestamp": "2015-09-12T00:00:00.000Z", "result": result}]


def time_boundary(shown: str) -> Any:
    low, high = rows("SELECT MIN(time), MAX(time) FROM wiki")[0]
    return [{"timestamp": iso(low), "result": {"minTime": iso(low), "maxTime": iso(high)}}]


def max_ingested(shown: str) -> Any:
    high = iso(one("SELECT MAX(time) FROM wiki"))
    return [{"timestamp": high, "result": {"maxIngestedEventTime": high}}]


def los_angeles(shown: str) -> Any:
    got = rows("SELECT date_trunc('hour', time), COUNT(*) FROM wiki WHERE time < '2015-09-12T02:00:00Z' "
               "GROUP BY 1 ORDER BY 1")  # fmt: skip
    pacific = dt.timezone(dt.timedelta(hours=-7))  # PDT on that day
    return [{"timestamp": iso(h.astimezone(pacific), "-07:00"), "result": {"edits": n}} for h, n in got]


def long_pages(shown: str) -> Any:
    net, n = rows("SELECT SUM(added - deleted), COUNT(*) FROM wiki WHERE length(page) > 40")[0]
    first = iso(one("SELECT MIN(time) FROM wiki"))  # Druid: the earliest cursor start, matched or not
    return [{"timestamp": first, "result": {"net": net, "edits": n, "net_per_edit": int(net) // n}}]


def fr_over_100(shown: str) -> Any:
    return [{"edits": one("SELECT COUNT(*) FROM wiki WHERE channel = '#fr.wikipedia' AND added > 100")}]


def channel_array(shown: str) -> Any:
    got = rows("SELECT channel, COUNT(*) FROM wiki GROUP BY 1 ORDER BY 2 DESC LIMIT 2")
    return [["channel", "edits"], ["STRING", "LONG"], ["VARCHAR", "BIGINT"], *[list(r) for r in got]]


def explain_topn(shown: str) -> str:
    # Druid's planner rule the doc states: one dimension, ordered by one aggregate, a LIMIT -> topN
    return '\\"queryType\\":\\"topN\\"'


def tokyo_days(shown: str) -> str:
    got = rows(
        "SELECT date_trunc('day', time AT TIME ZONE 'Asia/Tokyo'), COUNT(*) FROM wiki GROUP BY 1 ORDER BY 1"
    )
    return "\n".join(json.dumps({"d": d.strftime("%Y-%m-%dT00:00:00.000+09:00"), "edits": n}, separators=(",", ":"))
                     for d, n in got)  # fmt: skip


def pari_cities(shown: str) -> str:
    got = rows("SELECT cityName, COUNT(*) FROM wiki WHERE cityName LIKE 'Pari%' GROUP BY 1 ORDER BY 1")
    return "\n".join(f"{c}\t{n}" for c, n in got)


# -- realtime.md ---------------------------------------------------------------------------------

LIVE_EVENTS = """[{"time": "2015-09-12T10:00:01Z", "page": "Main Page", "added": 5},
                  {"time": "2015-09-12T10:00:30Z", "page": "Main Page", "added": 7},
                  {"time": "yesterday", "page": "Talk", "added": 1}]"""


@cache
def live_events() -> str:
    path = scratch() / "live.json"
    path.write_text(LIVE_EVENTS)
    db().execute(f"CREATE TABLE live AS SELECT * FROM read_json('{path}', "
                 "columns={time: 'VARCHAR', page: 'VARCHAR', added: 'BIGINT'})")  # fmt: skip
    return "(SELECT *, TRY_CAST(time AS TIMESTAMPTZ) AS t FROM live)"


def first_push(shown: str) -> Any:
    received, parsed = rows(f"SELECT COUNT(*), COUNT(t) FROM {live_events()}")[0]
    bad = one(f"SELECT time FROM {live_events()} WHERE t IS NULL")
    return {"eventCount": parsed, "received": received, "accepted": parsed, "unparseable": received - parsed,
            "thrownAway": 0, "lsn": 1,
            "parseErrors": [f"event 3: column 'time': unparseable or missing timestamp '{bad}'"]}  # fmt: skip


def retried_push(shown: str) -> Any:
    first = first_push(shown)
    return {k: first[k] for k in ("received", "accepted", "unparseable", "thrownAway", "eventCount")} | {
        "duplicate": True, "producerId": "loader-1", "producerSeq": 1}  # fmt: skip


def live_rows(rolled_up: bool) -> Oracle:
    def oracle(shown: str) -> str:
        minute = "date_trunc('minute', t)"
        stored = f"COUNT(DISTINCT {minute})" if rolled_up else "COUNT(*)"
        got = rows(
            f"SELECT page, COUNT(*), SUM(added), {stored} FROM {live_events()} WHERE t IS NOT NULL GROUP BY 1"
        )
        return csv_lines(("page", "edits", "added", "stored_rows"), *got)

    return oracle


def closed_bucket(shown: str) -> Any:
    return {"eventCount": 0, "received": 1, "accepted": 0, "unparseable": 0, "thrownAway": 1, "lsn": None,
            "parseErrors": ["1 events for a closed bucket: its segment was already handed off"]}  # fmt: skip


def realtime_event_gauges(shown: str) -> str:
    outcomes = ("received", "accepted", "unparseable", "thrownAway", "duplicates", "rejected")
    return "\n".join(f'strata_realtime_events{{outcome="{o}"}}' for o in outcomes)


# -- cache.md -----------------------------------------------------------------------------------


def segments_of_wikipedia() -> int:
    """The quickstart's day segments of the sample."""
    return int(one("SELECT COUNT(DISTINCT date_trunc('day', time)) FROM wiki"))


def lru_counts(shown: str) -> str:
    n = segments_of_wikipedia()  # run 1 misses and stores each segment, run 2 hits each
    return f"lru {n} {n} {n} {n}"


def cache_gauges(shown: str) -> str:
    n = segments_of_wikipedia()
    # + the timeBoundary: a whole-answer miss (stored), then a whole-answer hit; its segments are
    # answered from the time bounds historicals announce, so no partial is looked up or stored
    return f"druid_query_cache_total_numentries {n + 1}.0\ndruid_query_cache_total_hits {n + 1}.0\n" \
           f"druid_query_cache_total_misses {n + 1}.0"  # fmt: skip


def total_count(shown: str) -> Any:
    return [{"timestamp": min_time(), "result": {"edits": one("SELECT COUNT(*) FROM wiki")}}]


def first_hour_count(shown: str) -> Any:
    n = one("SELECT COUNT(*) FROM wiki WHERE time < '2015-09-12T01:00:00Z'")
    return [{"timestamp": min_time(), "result": {"edits": n}}]


# -- ingestion.md --------------------------------------------------------------------------------


def clicks() -> str:
    return csv_table("ingestion.md", "clicks.csv")


def late_clicks() -> str:
    return csv_table("ingestion.md", "late-clicks.csv")


def clicks_hours(shown: str) -> int:
    return int(one(f"SELECT COUNT(DISTINCT date_trunc('hour', t)) FROM {clicks()}"))


def clicks_by_country(shown: str) -> str:
    got = rows(f"SELECT country, COUNT(*) FROM {clicks()} GROUP BY 1 ORDER BY 1")
    return csv_lines(("country", "rows_"), *got)


def clicks_rollup_summary(shown: str) -> str:
    read, stored = rows(
        f"SELECT COUNT(*), COUNT(DISTINCT (date_trunc('day', t), country, device)) FROM {clicks()}"
    )[0]
    return f"{read} {stored} {read - stored} 2"  # numShards 2, both shards hold a country


def clicks_daily(shown: str) -> str:
    got = rows(f"SELECT country, COUNT(*), SUM(clicks::BIGINT), COUNT(DISTINCT (date_trunc('day', t), device)) "
               f"FROM {clicks()} GROUP BY 1 ORDER BY 1")  # fmt: skip
    return csv_lines(("country", "events", "clicks", "stored_rows"), *got)


def clicks_fr_summary(shown: str) -> str:
    """The transformSpec example: its filter keeps the FR rows and throws the others away."""
    kept, away = rows(f"SELECT COUNT(*) FILTER (WHERE country = 'FR'), COUNT(*) FILTER (WHERE country <> 'FR') "
                      f"FROM {clicks()}")[0]  # fmt: skip
    return f"{kept} {away}"


def clicks_fr_rows(shown: str) -> str:
    got = rows(
        f"SELECT upper(device), country || '/' || clicks FROM {clicks()} WHERE country = 'FR' ORDER BY t"
    )
    return csv_lines(("device", "label"), *got)


def tagged_types(shown: str) -> str:
    """The data-model example's segment: Druid's rules (tests.ingestion.data_model_oracle) over
    the rows the doc writes: `tags` has a row of several values, `sizes` and `geo` typed by theirs."""
    from tests.ingestion.data_model_oracle import auto_type

    lines = [json.loads(x) for x in doc_file("ingestion.md", "tagged.json").splitlines()]
    assert any(isinstance(r["tags"], list) and len(set(r["tags"])) > 1 for r in lines)
    geo = {k: auto_type([r["geo"].get(k) for r in lines]) for r in lines for k in r["geo"]}
    return "\n".join([
        "tags STRING multi-value",
        f"sizes {auto_type([r['sizes'] for r in lines])}",
        "geo " + " ".join([auto_type([r["geo"] for r in lines]), *(f"$.{k}:{t}" for k, t in geo.items())]),
    ])  # fmt: skip


def parse_failure(shown: str) -> str:
    got = rows(f"SELECT ts FROM {late_clicks()} WHERE t IS NULL")
    line = doc_file("ingestion.md", "late-clicks.csv").splitlines().index(f"{got[0][0]},DE,mobile,2") + 1
    return (f"strata ingest: error: more than maxParseExceptions=0 unparseable rows ({len(got)} so far); nothing "
            "was published. Set tuningConfig.maxParseExceptions to allow them.\n"
            f"  late-clicks.csv:{line}: column 'ts': unparseable or missing timestamp '{got[0][0]}'\nexit 1")  # fmt: skip


def parse_allowed(shown: str) -> str:
    good, bad = rows(f"SELECT COUNT(t), COUNT(*) - COUNT(t) FROM {late_clicks()}")[0]
    return f"{good} {bad} [\"late-clicks.csv:3: column 'ts': unparseable or missing timestamp 'not-a-time'\"]"


def late_days(shown: str) -> str:
    days = one(f"SELECT COUNT(DISTINCT date_trunc('day', t)) FROM {late_clicks()}")
    return f"{days} segment(s) dropped (marked unused)"


# -- operations.md, spark.md ----------------------------------------------------------------------


def historical_types(shown: str) -> str:
    # Druid's Prometheus emitter names for a historical (defaultMetrics.json), counters as _total
    names = [("druid_query_time", "histogram"), *[(f"druid_query_{k}count_total", "counter") for k in
             ("", "success_", "failed_", "interrupted_", "timeout_")],
             ("druid_query_segment_time", "histogram"), ("druid_query_wait_time", "histogram"),
             ("druid_segment_count", "gauge")]  # fmt: skip
    return "\n".join(f"# TYPE {n} {t}" for n, t in names)


def spark_totals(shown: str) -> str:
    hours, edits, added, stored = rows(
        "SELECT COUNT(DISTINCT date_trunc('hour', time)), COUNT(*), SUM(added), "
        "COUNT(DISTINCT (date_trunc('hour', time), channel)) FROM wiki")[0]  # fmt: skip
    fr_hours, fr_added = rows(
        "SELECT COUNT(DISTINCT date_trunc('hour', time)), SUM(added) FROM wiki WHERE channel = '#fr.wikipedia' "
        "AND time >= '2015-09-12T12:00:00Z' AND time < '2015-09-12T15:00:00Z'")[0]  # fmt: skip
    return f"{hours} {edits} {added} {stored}\n{fr_hours} {fr_added}"


def console_segments(shown: str) -> Any:
    """console.md's datasource summary: the quickstart's day segments, all available, none overshadowed."""
    n = segments_of_wikipedia()
    return [{"datasource": wikipedia_name(), "segments": n, "available": n, "overshadowed": 0}]


def security_users(shown: str) -> str:
    """security.md's user list: each user with the roles the block assigns it, as its commands say."""
    block = next(b.body for b in fenced_blocks([d for d in DOCUMENTS if d.name == "security.md"])
                 if b.tested and "metadata.db users" in b.body)  # fmt: skip
    roles: dict[str, list[str]] = {}
    for user, role in re.findall(r"^strata security .* assign (\S+) (\S+)$", block, re.M):
        roles.setdefault(user, []).append(role)
    return "\n".join(f"{user}: {', '.join(r)}" for user, r in sorted(roles.items()))


def wikipedia_name() -> str:
    return str(json.loads(WIKIPEDIA_INDEX_SPEC.read_text())["spec"]["dataSchema"]["dataSource"])
