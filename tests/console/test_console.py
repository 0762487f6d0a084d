"""The web console in a real browser (Debian's chromium driven by Playwright) against a real
quickstart cluster: what each page shows is checked against the public APIs it reads.

Screenshots go to a pytest temporary directory (its path is printed); with STRATA_CONSOLE_IMAGES
set to a directory they are written there too (docs/images holds one such set).
"""

from __future__ import annotations

import csv
import io
import json
import os
import random
import re
import shutil
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from harness.processes import StrataProcess, running
from strata.cli.local_servers import MemcachedServer, free_port
from tests.lifecycle.test_quickstart_lifecycle import quickstart

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]  # fmt: skip
HOURLY = "wikipedia_hourly"  # a second datasource, ingested twice: two versions on the timeline
TOP_CHANNELS = 'SELECT channel, COUNT(*) AS edits, SUM(added) AS added FROM wikipedia GROUP BY channel ORDER BY edits DESC LIMIT 12'  # fmt: skip


def sql_api(broker: str, query: str) -> dict[str, Any]:
    """The SQL API's answer: column names and rows (resultFormat array with a header)."""
    resp = httpx.post(f"{broker}/druid/v2/sql/", json={"query": query, "resultFormat": "array", "header": True},
                      timeout=60)  # fmt: skip
    assert resp.status_code == 200, resp.text
    names, *rows = resp.json()
    return {"names": names, "rows": rows}


def sql_objects(broker: str, query: str) -> list[dict[str, Any]]:
    resp = httpx.post(f"{broker}/druid/v2/sql/", json={"query": query}, timeout=60)
    assert resp.status_code == 200, resp.text
    return list(resp.json())


def _ingest_two_versions(work: Path) -> None:
    """`wikipedia_hourly` in six-hour segments, then its first half again (a newer version)."""
    from strata.data import WIKIPEDIA_INDEX_SPEC, WIKIPEDIA_SAMPLE
    from strata.ingestion.api import ingest

    for interval in ("2015-09-12/2015-09-13", "2015-09-12T00:00:00Z/2015-09-12T12:00:00Z"):
        spec = json.loads(WIKIPEDIA_INDEX_SPEC.read_text())
        spec["spec"]["dataSchema"]["dataSource"] = HOURLY
        spec["spec"]["dataSchema"]["granularitySpec"].update(
            segmentGranularity="six_hour", intervals=[interval]
        )
        spec["spec"]["ioConfig"]["inputSource"]["baseDir"] = str(WIKIPEDIA_SAMPLE.parent)
        ingest(spec, deep_storage=work / "deep-storage", metadata=str(work / "metadata.db"))


def _wait(check: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.3)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    if not CHROMIUM.exists():
        pytest.skip(
            f"{CHROMIUM} is not installed (scripts/install-system-packages.sh test installs Debian's chromium)"
        )
    work = tmp_path_factory.mktemp("console-cluster")
    with quickstart(work) as (_proc, _pids, ports):
        broker, realtime = f"http://127.0.0.1:{ports[0]}", f"http://127.0.0.1:{ports[3]}"
        _ingest_two_versions(work)
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")
        events = [json.dumps({"time": now, "channel": "#en", "page": f"Page {i % 4}", "user": "u", "added": i})
                  for i in range(30)] + ["{not json"]  # fmt: skip
        pushed = httpx.post(f"{realtime}/v1/push/wikipedia_live", content="\n".join(events), timeout=30)
        assert pushed.status_code == 200 and pushed.json()["accepted"] == 30, pushed.text

        def settled() -> bool:
            rows = sql_objects(
                broker, "SELECT datasource, COUNT(*) AS n FROM sys.segments GROUP BY datasource"
            )
            counts = {r["datasource"]: r["n"] for r in rows}
            return counts.get(HOURLY) == 4 and counts.get("wikipedia_live") == 1

        _wait(settled, 90, "the historicals to load wikipedia_hourly and the real-time segment")
        nodes = f"127.0.0.1:{ports[1]},127.0.0.1:{ports[2]},127.0.0.1:{ports[3]}/realtime"
        yield {
            "broker": broker,
            "realtime": realtime,
            "nodes": nodes,
            "coordinator": f"http://127.0.0.1:{ports[4]}",
        }


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("console-screenshots")
    print(f"\nconsole screenshots in {path}")
    return path


def snap(page: Any, shots: Path, name: str, *, docs: bool = True, full: bool = True) -> None:
    """A screenshot in `shots` (the whole page, or the query editor's area); also in
    $STRATA_CONSOLE_IMAGES when the docs show it."""
    target = shots / f"{name}.png"
    if full:
        page.screenshot(path=str(target), full_page=True)
    else:
        page.screenshot(path=str(target), clip={"x": 0, "y": 0, "width": 1360, "height": 380})
    also = os.environ.get("STRATA_CONSOLE_IMAGES")
    if also and docs:
        Path(also).mkdir(parents=True, exist_ok=True)
        shutil.copy(target, Path(also) / f"console-{name}.png")


@pytest.fixture(scope="module")
def browser(cluster: dict[str, Any]) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def page(browser: Any, cluster: dict[str, Any]) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1360, "height": 860}, accept_downloads=True)
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=cluster["broker"])
    context.set_default_timeout(60_000)  # a loaded CI machine: the quickstart shares 2 cores
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        yield page
        assert errors == [], errors  # no script error on any page
    finally:
        context.close()


def open_console(page: Any, broker: str) -> None:
    page.goto(broker + "/")
    page.click("text=Open the web console")
    page.wait_for_selector("#schema details")


def type_sql(page: Any, text: str) -> None:
    page.click("#sql-editor textarea")
    page.keyboard.press("Control+a")
    page.keyboard.press("Delete")
    page.keyboard.insert_text(text)


def run_and_wait(page: Any) -> None:
    page.keyboard.press("Control+Enter")
    page.wait_for_selector("#run-status[data-rows]")


def grid(page: Any) -> dict[str, Any]:
    names = page.eval_on_selector_all("#grid th", "ths => ths.map(th => th.dataset.col)")
    rows = page.eval_on_selector_all(
        "#grid tbody tr", "trs => trs.map(tr => [...tr.children].map(td => td.dataset.value))"
    )
    return {"names": names, "rows": rows}


def as_text(rows: list[list[Any]]) -> list[list[str]]:
    return [["null" if v is None else str(v) for v in row] for row in rows]


def test_a_typed_query_runs_and_the_grid_sorts_copies_downloads_and_charts(
    page: Any, cluster: dict[str, Any], shots: Path
) -> None:
    broker = cluster["broker"]
    open_console(page, broker)
    assert page.eval_on_selector_all("#schema details", "ds => ds.map(d => d.dataset.table)") == sorted(
        [HOURLY, "wikipedia", "wikipedia_live"]
    )
    type_sql(page, "")
    page.keyboard.type("SELECT chan")  # completion from INFORMATION_SCHEMA.COLUMNS
    page.wait_for_selector(".completions:not([hidden]) li")
    assert "channel" in page.eval_on_selector_all(
        ".completions li .completion-text", "l => l.map(x => x.textContent)"
    )
    snap(page, shots, "completion", full=False)
    page.keyboard.press("Tab")
    page.keyboard.insert_text(TOP_CHANNELS.removeprefix("SELECT channel"))
    assert page.input_value("#sql-editor textarea") == TOP_CHANNELS
    assert page.locator("#sql-editor .tok-keyword", has_text="GROUP").count() == 1  # highlighted
    run_and_wait(page)
    want = sql_api(broker, TOP_CHANNELS)
    shown = grid(page)
    assert shown["names"] == want["names"] == ["channel", "edits", "added"]
    assert shown["rows"] == as_text(want["rows"])
    assert page.get_attribute("#run-status", "data-rows") == str(len(want["rows"]))
    snap(page, shots, "query")

    page.click('#grid th[data-col="added"]')  # sort ascending by a number column
    assert grid(page)["rows"] == as_text(sorted(want["rows"], key=lambda r: r[2]))
    page.click('#grid th[data-col="added"]')
    assert grid(page)["rows"] == as_text(sorted(want["rows"], key=lambda r: -r[2]))

    page.click('[data-copy="csv"]')
    page.wait_for_selector(".copy-status:has-text('copied')")
    copied = page.evaluate("navigator.clipboard.readText()")
    assert list(csv.reader(io.StringIO(copied))) == [want["names"], *as_text(want["rows"])]
    page.select_option('select[aria-label="download format"]', "json")
    with page.expect_download() as download:
        page.click("[data-download]")
    saved = json.loads(Path(download.value.path()).read_text())
    assert saved == [dict(zip(want["names"], row, strict=True)) for row in want["rows"]]

    page.click('[data-view="chart"]')  # a string column and numbers: bars of the first number
    bars = page.eval_on_selector_all(
        "svg.chart rect.bar", "rs => rs.map(r => [r.dataset.label, Number(r.dataset.value)])"
    )
    assert bars == [[row[0], row[1]] for row in want["rows"]]
    snap(page, shots, "chart-bars", docs=False)

    page.reload()  # the history survives in localStorage
    page.wait_for_selector("#history li")
    assert page.eval_on_selector_all("#history li", "ls => ls.map(l => l.title)")[0] == TOP_CHANNELS


def test_a_time_series_chart_and_explain_with_the_brokers_part(
    page: Any, cluster: dict[str, Any], shots: Path
) -> None:
    broker = cluster["broker"]
    open_console(page, broker)
    hourly = (f"SELECT TIME_FLOOR(__time, 'PT1H') AS \"hour\", COUNT(*) AS edits, SUM(deleted) AS deleted "
              f"FROM {HOURLY} GROUP BY 1 ORDER BY 1")  # fmt: skip
    type_sql(page, hourly)
    run_and_wait(page)
    want = sql_api(broker, hourly)
    assert grid(page)["rows"] == as_text(want["rows"])
    page.click('[data-view="chart"]')
    assert page.get_attribute("svg.chart", "data-kind") == "time"
    lines = page.eval_on_selector_all(
        "svg.chart polyline.series",
        "ps => ps.map(p => [p.dataset.col, p.getAttribute('points').split(' ').length])",
    )
    assert lines == [["edits", len(want["rows"])], ["deleted", len(want["rows"])]]
    snap(page, shots, "chart-time")

    type_sql(page, "")
    page.keyboard.type("SELECT * FROM wiki")  # table names complete too
    page.wait_for_selector(".completions:not([hidden]) li")
    offered = page.eval_on_selector_all(
        ".completions li", "l => l.map(x => [x.children[0].textContent, x.children[1].textContent])"
    )
    assert [name for name, kind in offered if kind == "table"] == ["wikipedia", HOURLY, "wikipedia_live"]
    # focus lost and back at once (a screenshot or a window switch does it): the list stays open
    page.eval_on_selector("#sql-editor textarea", "t => { t.blur(); t.focus(); }")
    page.wait_for_timeout(400)
    assert page.is_visible(".completions li")
    page.keyboard.press("Escape")
    type_sql(page, "")
    page.keyboard.type("SELECT us")  # a column named like a reserved word is inserted quoted
    page.wait_for_selector(".completions:not([hidden]) li")
    page.keyboard.press("Enter")
    assert page.input_value("#sql-editor textarea") == 'SELECT "user"'

    ranked = "SELECT channel, COUNT(*) AS c, RANK() OVER (ORDER BY COUNT(*) DESC) AS r FROM wikipedia GROUP BY channel"
    type_sql(page, ranked)
    page.click("#explain")
    page.wait_for_selector("#plan .plan-part")
    plan = json.loads(sql_objects(broker, f"EXPLAIN PLAN FOR {ranked}")[0]["PLAN"])
    titles = page.eval_on_selector_all("#plan h4", "hs => hs.map(h => h.textContent)")
    shown = page.eval_on_selector_all("#plan pre", "ps => ps.map(p => JSON.parse(p.textContent))")
    natives = [p["query"] for p in plan if "query" in p]
    assert len(titles) == len(plan) and titles[0].startswith("Native query 1 of 1: groupBy")
    assert "broker's part" in titles[-1]
    assert [{k: v for k, v in q.items() if k != "context"} for q in shown[: len(natives)]] == [
        {k: v for k, v in q.items() if k != "context"} for q in natives
    ]  # the same native query (only the query id differs)
    stage = re.compile(r"__stage\d+")  # stage names are numbered per planning, not per statement
    broker_part = json.dumps([p["broker"] for p in plan if "broker" in p][-1])
    assert stage.sub("__stage", json.dumps(shown[-1])) == stage.sub("__stage", broker_part)
    snap(page, shots, "explain")


def test_the_native_json_tab(page: Any, cluster: dict[str, Any]) -> None:
    broker = cluster["broker"]
    open_console(page, broker)
    page.click('[data-tab="native"]')
    query = {"queryType": "topN", "dataSource": "wikipedia", "intervals": ["2015-09-12/2015-09-13"],
             "granularity": "all", "dimension": "page", "metric": "edits", "threshold": 5,
             "aggregations": [{"type": "count", "name": "edits"}]}  # fmt: skip
    page.click("#native-editor textarea")
    page.keyboard.press("Control+a")
    page.keyboard.insert_text(json.dumps(query, indent=2))
    run_and_wait(page)
    answer = httpx.post(f"{broker}/druid/v2/", json=query, timeout=60).json()
    want = [[answer[0]["timestamp"], r["page"], str(r["edits"])] for r in answer[0]["result"]]
    shown = grid(page)
    assert shown["names"] == ["timestamp", "page", "edits"]
    assert shown["rows"] == want

    page.keyboard.insert_text("{ not json")  # errors: the parser's, then Druid's body from the API
    page.keyboard.press("Control+Enter")
    page.wait_for_selector('#run-status[data-outcome="failed"]')
    assert "Invalid JSON" in page.text_content("#query-error")
    page.click('[data-tab="sql"]')
    bad = "SELECT nope FROM wikipedia"
    type_sql(page, bad)
    page.keyboard.press("Control+Enter")
    page.wait_for_selector('#run-status[data-outcome="failed"]')
    answer = httpx.post(f"{broker}/druid/v2/sql/", json={"query": bad}, timeout=60)
    assert answer.status_code == 400
    assert page.text_content("#query-error .error strong") == answer.json()["error"]
    assert answer.json()["errorMessage"] in page.text_content("#query-error")


def test_a_query_cancelled_from_the_console_stops_on_the_broker(page: Any, cluster: dict[str, Any]) -> None:
    """A statement of 400 native queries run one after another (never cached: each filter is new;
    HAVING keeps every answer empty, so the subqueries' row limit never ends it first: ~10 s in all);
    Cancel stops it, and the broker runs no more of them."""
    broker = cluster["broker"]
    open_console(page, broker)
    salt = random.randrange(10**9)
    statements = 400
    parts = [f'SELECT page, "user", COUNT(*) AS c FROM wikipedia WHERE added > {salt + i} - {salt} GROUP BY 1, 2'
             f" HAVING COUNT(*) > {10**9}" for i in range(statements)]  # fmt: skip
    type_sql(page, "SELECT COUNT(*) AS n FROM (" + " UNION ALL ".join(parts) + ")")

    def broker_queries() -> int:
        servers = httpx.get(f"{broker}/status/cluster", timeout=10).json()["servers"]
        return int(next(s["queries"] for s in servers if s["type"] == "broker"))

    before = broker_queries()
    page.click("#run")
    _wait(lambda: broker_queries() >= before + 2, 60, "the statement's native queries to start")
    page.click("#cancel")
    page.wait_for_selector("#run-status[data-outcome]", timeout=60_000)
    assert page.get_attribute("#run-status", "data-outcome") == "cancelled", page.text_content("#run-status")
    assert "cancelled" in page.text_content("#query-error").lower()
    assert httpx.get(f"{broker}/status", timeout=10).json()["runningQueries"] == 0
    stopped = broker_queries()
    time.sleep(1.5)
    assert broker_queries() == stopped < before + statements  # nothing more of the statement ran


def _table(page: Any, selector: str, key: str) -> dict[str, dict[str, str]]:
    """A page's table as {row key: {cell key: data-value}}."""
    rows = page.eval_on_selector_all(
        f"{selector} tbody tr",
        """(trs, key) => trs.map(tr => [tr.dataset[key],
             Object.fromEntries([...tr.querySelectorAll('td[data-key]')].map(td => [td.dataset.key, td.dataset.value]))])""",
        key,
    )
    return {k: v for k, v in rows}


def test_the_datasources_page_matches_sys_segments(page: Any, cluster: dict[str, Any], shots: Path) -> None:
    broker = cluster["broker"]
    page.goto(broker + "/console/#datasources")
    page.wait_for_selector("#datasources-table")
    segments = sql_objects(
        broker,
        'SELECT datasource, "start", "end", "size", version, is_available, is_realtime FROM sys.segments',
    )
    shown = _table(page, "#datasources-table", "datasource")
    assert sorted(shown) == sorted({s["datasource"] for s in segments})
    for name, row in shown.items():
        mine = [s for s in segments if s["datasource"] == name]
        count = sql_objects(broker, f'SELECT COUNT(*) AS n FROM "{name}"')[0]["n"]
        realtime = sum(s["is_realtime"] for s in mine)
        assert row == {
            "name": name,
            "rows": str(count),
            "size": str(sum(s["size"] for s in mine)),
            "segments": str(len(mine)),
            "range": f"{min(s['start'] for s in mine)}/{max(s['end'] for s in mine)}",
            "availability": f"{sum(s['is_available'] for s in mine)}/{len(mine)}",
            "historical": str(len(mine) - realtime),
            "realtime": str(realtime),
        }, name
        boxes = page.eval_on_selector_all(
            f'[data-timeline="{name}"] rect.seg', "rs => rs.map(r => r.getAttribute('class'))"
        )
        assert len(boxes) == len(mine)
        assert sum("seg-realtime" in b for b in boxes) == realtime
        lanes = page.eval_on_selector_all(f'[data-timeline="{name}"] .lane-label', "ls => ls.length")
        assert lanes == len({s["version"] for s in mine})
    assert shown[HOURLY]["rows"] == "39244" and shown["wikipedia_live"]["realtime"] == "1"
    assert page.eval_on_selector_all(f'[data-timeline="{HOURLY}"] .lane-label', "ls => ls.length") == 2
    snap(page, shots, "datasources")

    # the picture's other states, drawn by the page's own module from rows shaped as sys.segments':
    # a version overshadowed by a newer one, and a segment no server has loaded
    classes = page.evaluate("""async () => {
        const { renderTimeline } = await import('./timeline.js');
        const row = (id, start, end, version, o, a, r) => ({ segment_id: id, start, end, version, partition_num: 0,
            num_rows: 1, size: 1, num_replicas: a, is_overshadowed: o, is_available: a, is_realtime: r });
        const svg = renderTimeline([row('old', '2015-09-12T00:00:00.000Z', '2015-09-13T00:00:00.000Z', 'v1', 1, 1, 0),
                                    row('new', '2015-09-12T00:00:00.000Z', '2015-09-13T00:00:00.000Z', 'v2', 0, 1, 0),
                                    row('lost', '2015-09-13T00:00:00.000Z', '2015-09-14T00:00:00.000Z', 'v1', 0, 0, 0)], 900);
        return Object.fromEntries([...svg.querySelectorAll('rect.seg')].map(r => [r.dataset.segment, r.getAttribute('class')]));
    }""")
    assert classes == {
        "old": "seg seg-overshadowed",
        "new": "seg seg-historical",
        "lost": "seg seg-unavailable",
    }


def test_the_servers_page_matches_status_cluster(page: Any, cluster: dict[str, Any], shots: Path) -> None:
    broker = cluster["broker"]
    page.goto(broker + "/console/#servers")
    page.wait_for_selector("#servers-table")
    shown = _table(page, "#servers-table", "server")
    servers = httpx.get(f"{broker}/status/cluster", timeout=10).json()["servers"]
    assert sorted(shown) == sorted(s["server"] for s in servers)
    assert sorted(s["type"] for s in servers) == ["broker", "historical", "historical", "realtime"]
    sys_servers = {
        s["server"]: s for s in sql_objects(broker, "SELECT server, server_type, curr_size FROM sys.servers")
    }
    for s in servers:
        row = shown[s["server"]]
        assert (row["type"], row["segments"], row["health"]) == (s["type"], str(s["segments"]), "healthy")
        if s["type"] != "broker":  # bytes as sys.servers counts them
            assert row["bytes"] == str(s["bytes"]) == str(sys_servers[s["server"]]["curr_size"])
            assert sys_servers[s["server"]]["server_type"] == s["type"]
    broker_status = next(s["status"] for s in servers if s["type"] == "broker")
    for card in ("runningQueries", "queuedQueries", "lostSegments"):  # nothing runs meanwhile: 0
        assert page.text_content(f'[data-card="{card}"] b') == str(broker_status[card]) == "0"
    page.click('[data-refresh="servers"]')  # a second reading gives rates (sooner than the timer)
    page.wait_for_function(
        "document.querySelector('#servers-table td[data-key=qps]').dataset.value !== 'null'"
    )
    snap(page, shots, "servers")


def test_the_cache_page_matches_status_cache(page: Any, cluster: dict[str, Any], shots: Path) -> None:
    broker = cluster["broker"]
    page.goto(broker + "/console/#cache")
    page.wait_for_selector("#cache-levels")
    status = httpx.get(f"{broker}/status/cache", timeout=10).json()
    assert status["kind"] == "lru"
    assert page.text_content('[data-card="kind"] b') == "lru"
    shown = _table(page, "#cache-levels", "level")
    backend = status["backend"]
    for key in ("hits", "misses", "entries", "bytes", "evictions", "errors", "timeouts"):
        assert shown["all"][key] == str(backend[key]), key
    assert (shown["result"]["hits"], shown["result"]["misses"]) == (
        str(status["resultLevel"]["hits"]), str(status["resultLevel"]["misses"]))  # fmt: skip
    assert "No memcached" in page.text_content("#cache-breakers")  # the quickstart's cache is lru
    snap(page, shots, "cache", docs=False)  # the docs show the hybrid broker's page


def test_the_ingestion_page_matches_the_realtime_nodes_status(
    page: Any, cluster: dict[str, Any], shots: Path
) -> None:
    broker, realtime = cluster["broker"], cluster["realtime"]
    page.goto(broker + "/console/#ingestion")
    page.wait_for_selector("#ingestion-table")
    ingestion = httpx.get(f"{realtime}/status", timeout=10).json()["strata"]["ingestion"]  # the node itself
    row = _table(page, "#ingestion-table", "datasource")["wikipedia_live"]
    assert row["accepted"] == str(ingestion["events"]["accepted"]) == "30"
    assert row["unparseable"] == str(ingestion["events"]["unparseable"]) == "1"
    assert row["rowsInMemory"] == str(ingestion["rowsInMemory"])
    assert (row["persists"], row["handoffs"]) == (str(ingestion["persists"]), str(ingestion["handoffs"]))
    pending = sum(1 for s in ingestion["segments"] if s["closed"] or s["published"])
    assert row["pendingHandoffs"] == str(pending)
    page.click('[data-refresh="ingestion"]')  # a second reading gives the rate
    page.wait_for_function(
        "document.querySelector('#ingestion-table td[data-key=eventsPerSecond]').dataset.value !== 'null'"
    )
    snap(page, shots, "ingestion")


def _inline_task(data_source: str, data: str) -> dict[str, Any]:
    return {"type": "index_parallel", "spec": {
        "dataSchema": {"dataSource": data_source, "timestampSpec": {"column": "time", "format": "iso"},
                       "dimensionsSpec": {"dimensions": ["page"]}, "granularitySpec": {"segmentGranularity": "day"}},
        "ioConfig": {"inputSource": {"type": "inline", "data": data}, "inputFormat": {"type": "json"}}}}  # fmt: skip


def test_the_ingestion_page_lists_the_tasks_as_the_task_api_does(
    page: Any, cluster: dict[str, Any], shots: Path
) -> None:
    """Two tasks posted to the broker (which relays Druid's task API to the quickstart's coordinator,
    found in ZooKeeper): one succeeds, one fails on a bad row; the page shows both as the API lists them."""
    broker, coordinator = cluster["broker"], cluster["coordinator"]
    good = _inline_task("console_tasks", '{"time": "2015-09-12T01:00:00Z", "page": "a"}')
    bad = _inline_task("console_tasks_bad", "not json")
    ids = []
    for body in (good, bad):
        resp = httpx.post(f"{broker}/druid/indexer/v1/task", json=body, timeout=30)
        assert resp.status_code == 200, resp.text
        ids.append(resp.json()["task"])
    _wait(lambda: all(httpx.get(f"{coordinator}/druid/indexer/v1/task/{i}/status", timeout=10).json()["status"]
                      ["statusCode"] != "RUNNING" for i in ids), 120, "both tasks to finish")  # fmt: skip
    listed = {t["id"]: t for t in httpx.get(f"{coordinator}/druid/indexer/v1/tasks", timeout=10).json()}
    page.goto(broker + "/console/#ingestion")
    page.wait_for_selector("#tasks-table tbody tr")
    shown = _table(page, "#tasks-table", "task")
    assert set(shown) == set(listed)  # every task the API lists, nothing else
    for task_id, row in shown.items():
        assert row["state"] == listed[task_id]["statusCode"]
        assert (row["type"], row["dataSource"], row["errorMsg"]) == (
            listed[task_id]["type"], listed[task_id]["dataSource"], listed[task_id]["errorMsg"] or "")  # fmt: skip
    assert (shown[ids[0]]["state"], shown[ids[1]]["state"]) == ("SUCCESS", "FAILED")
    assert "maxParseExceptions" in shown[ids[1]]["errorMsg"]
    log_href = page.get_attribute(f'#tasks-table tr[data-task="{ids[1]}"] a[data-link="log"]', "href")
    assert httpx.get(log_href, timeout=10).text == httpx.get(
        f"{coordinator}/druid/indexer/v1/task/{ids[1]}/log", timeout=10).text  # fmt: skip
    snap(page, shots, "tasks")


def test_the_lookups_page_matches_the_lookup_api(page: Any, cluster: dict[str, Any], shots: Path,
                                               tmp_path: Path) -> None:  # fmt: skip
    """A map lookup every node loads and a file lookup none can (its file is missing): the page's
    rows against what was configured and the coordinator's status and nodeStatus."""
    api = cluster["coordinator"] + "/druid/coordinator/v1/lookups"
    if httpx.get(api + "/config", timeout=30).status_code == 404:
        assert httpx.post(api + "/config", json={}, timeout=30).status_code == 202
    missing = {"type": "cachedNamespace", "extractionNamespace": {"type": "uri", "uri": (tmp_path / "gone.json").as_uri(),
               "namespaceParseSpec": {"format": "simpleJson"}}}  # fmt: skip
    config = {"__default": {"country": {"version": "v1", "lookupExtractorFactory": {"type": "map", "map": {"US": "USA"}}},
                            "owners": {"version": "2024-05", "lookupExtractorFactory": missing}},
              "analysts": {"country": {"version": "v9", "lookupExtractorFactory": {"type": "map", "map": {}}}}}  # fmt: skip
    assert httpx.post(api + "/config", json=config, timeout=30).status_code == 202
    node_count = 4  # the quickstart's broker, two historicals and real-time node serve __default

    def reported() -> bool:
        nodes = httpx.get(api + "/nodeStatus/__default", timeout=30).json()
        return len(nodes) == node_count and all(
            "country" in s["current"] and "owners" in s["toLoad"] for s in nodes.values()
        )

    _wait(reported, 60, "every node to load country and fail owners")
    status = httpx.get(api + "/status", params={"detailed": "true"}, timeout=30).json()
    node_status = httpx.get(api + "/nodeStatus", timeout=30).json()
    page.goto(cluster["broker"] + "/console/#lookups")
    page.wait_for_selector("#lookups-table tbody tr")
    rows = _table(page, "#lookups-table", "lookup")
    assert sorted(rows) == ["__default/country", "__default/owners", "analysts/country"]
    types = {"__default/country": "map", "__default/owners": "cachedNamespace/uri", "analysts/country": "map"}
    for key, row in rows.items():
        tier, name = key.split("/")
        want = status[tier][name]
        assert row == {"tier": tier, "name": name, "version": config[tier][name]["version"], "type": types[key],
                       "state": "loaded" if want["loaded"] else "pending",
                       "pendingNodes": ",".join(want["pendingNodes"])}  # fmt: skip
    assert rows["__default/owners"]["state"] == "pending" and rows["__default/country"]["state"] == "loaded"
    nodes = _table(page, "#lookup-nodes", "node")
    assert sorted(nodes) == sorted(node_status["__default"])
    for node, row in nodes.items():
        assert row["loaded"].split(",") == sorted(node_status["__default"][node]["current"])
        assert row["toLoad"] == "owners" and "gone.json" in row["loadError"]
    snap(page, shots, "lookups")


def test_a_hybrid_brokers_cache_page_shows_both_levels_and_the_memcached_breaker(
    page: Any, cluster: dict[str, Any], shots: Path, tmp_path: Path
) -> None:
    """A second broker beside the quickstart's (the same data nodes, by their HTTP change feeds) with
    `--cache hybrid` over a memcached this test starts, then stops: the breaker opens on the page."""
    if not MemcachedServer.available():
        pytest.skip("memcached is not installed (scripts/install-system-packages.sh test installs it)")
    memcached = MemcachedServer(free_port(), tied=True).start()
    hybrid = StrataProcess("broker", ["--discovery", "http", "--nodes", cluster["nodes"], "--cache", "hybrid",
                                      "--memcached", memcached.address], tmp_path / "broker-hybrid.log")  # fmt: skip
    with running([hybrid]):
        try:
            hybrid.start()
            _wait(lambda: "wikipedia" in httpx.get(f"{hybrid.url}/druid/v2/datasources", timeout=10).json(), 60,
                  "the second broker to see wikipedia")  # fmt: skip
            query = {"queryType": "timeseries", "dataSource": HOURLY, "intervals": ["2015-09-12/2015-09-13"],
                     "granularity": "all", "aggregations": [{"type": "longSum", "name": "added", "fieldName": "added"}],
                     "context": {"useResultLevelCache": False}}  # fmt: skip
            for _ in range(2):  # stored in both levels, then read from the first
                assert httpx.post(f"{hybrid.url}/druid/v2/", json=query, timeout=60).status_code == 200
            page.goto(hybrid.url + "/console/#cache")
            page.wait_for_selector("#cache-breakers tr[data-breaker]")
            status = httpx.get(f"{hybrid.url}/status/cache", timeout=10).json()
            shown = _table(page, "#cache-levels", "level")
            for level in ("l1", "l2"):
                for key in ("hits", "misses", "entries", "bytes", "evictions"):
                    assert shown[level][key] == str(status["levels"][level][key]), (level, key)
            assert status["levels"]["l1"]["entries"] >= 4  # a partial per segment of wikipedia_hourly
            breaker = _table(page, "#cache-breakers", "breaker")[memcached.address]
            assert (
                breaker
                == {"state": "closed", "trips": "0"}
                == {k: str(v) for k, v in status["breakers"][memcached.address].items()}
            )

            memcached.stop()
            other = {**query, "intervals": ["2015-09-12/2015-09-12T12:00:00Z"]}  # not cached at either level
            assert httpx.post(f"{hybrid.url}/druid/v2/", json=other, timeout=60).status_code == 200
            page.click('[data-refresh="cache"]')
            page.wait_for_selector('#cache-breakers td[data-key="state"][data-value="open"]')
            status = httpx.get(f"{hybrid.url}/status/cache", timeout=10).json()
            assert status["breakers"][memcached.address]["state"] == "open"
            breaker = _table(page, "#cache-breakers", "breaker")[memcached.address]
            assert breaker["trips"] == str(status["breakers"][memcached.address]["trips"])
            snap(page, shots, "cache-hybrid")
        finally:
            memcached.stop()


CONSOLE_ROWS: list[dict[str, Any]] = [  # the rows the console's INSERT reads (inline), and the oracle of what it writes
    {"time": f"2015-09-1{2 + i % 2}T0{i % 10}:15:00Z", "channel": f"#c{i % 3}", "page": f"P{i % 5}", "added": i * 7}
    for i in range(20)
]  # fmt: skip


def _console_insert(target: str) -> str:
    data = "\n".join(json.dumps(r) for r in CONSOLE_ROWS).replace("'", "''")
    return (f"-- typed in the console\nINSERT INTO {target}\n"
            'SELECT TIME_PARSE("time") AS __time, channel, page, added\n'
            f"FROM TABLE(inline(data => '{data}', format => 'json'))\n"
            '  EXTEND ("time" VARCHAR, channel VARCHAR, page VARCHAR, added BIGINT)\n'
            "PARTITIONED BY DAY")  # fmt: skip


def test_an_insert_typed_in_the_console_runs_as_a_task_and_a_bad_one_shows_druids_error(
    page: Any, cluster: dict[str, Any], shots: Path
) -> None:
    """INSERT goes to the SQL task API: the page follows the task to its end and shows what the task
    API says of it; the data source then answers as the raw rows do. EXPLAIN shows the task's plan;
    a statement Druid refuses shows Druid's message and starts no task."""
    broker, coordinator = cluster["broker"], cluster["coordinator"]
    open_console(page, broker)
    type_sql(page, _console_insert("console_sql"))
    page.click("#explain")
    page.wait_for_selector("#run-status[data-rows]")
    assert not page.is_hidden("#plan") and "SQL ingestion into console_sql" in page.text_content("#plan")

    type_sql(page, _console_insert("console_sql"))
    page.keyboard.press("Control+Enter")
    page.wait_for_selector("#run-status[data-outcome]", timeout=120_000)
    task_id = page.get_attribute("#run-status", "data-task")
    assert page.get_attribute("#run-status", "data-outcome") == "success", page.text_content("#query-error")
    status = httpx.get(f"{coordinator}/druid/indexer/v1/task/{task_id}/status", timeout=10).json()["status"]
    shown = _table(page, "#task-table", "task")[task_id]
    assert (shown["state"], shown["dataSource"], shown["rows"]) == (status["statusCode"], "console_sql", "20")
    assert status["type"] == "query_controller" and int(shown["segments"]) == 2  # two days
    snap(page, shots, "sql-task")

    def loaded() -> bool:
        rows = sql_objects(broker, "SELECT COUNT(*) AS n FROM sys.segments WHERE datasource = 'console_sql'")
        return rows[0]["n"] == 2

    _wait(loaded, 90, "the historicals to load console_sql")
    got = sql_api(
        broker, "SELECT channel, COUNT(*) AS n, SUM(added) AS added FROM console_sql GROUP BY 1 ORDER BY 1"
    )
    want: dict[str, list[int]] = {}
    for r in CONSOLE_ROWS:
        want.setdefault(r["channel"], [0, 0])
        want[r["channel"]][0] += 1
        want[r["channel"]][1] += r["added"]
    assert got["rows"] == [[c, n, a] for c, (n, a) in sorted(want.items())]

    before = httpx.get(f"{coordinator}/druid/indexer/v1/tasks", timeout=10).json()
    type_sql(page, _console_insert("console_sql").removesuffix("PARTITIONED BY DAY"))
    page.keyboard.press("Control+Enter")
    page.wait_for_selector('#run-status[data-outcome="failed"]')
    assert "requires a PARTITIONED BY to be explicitly defined" in page.text_content("#query-error")
    assert page.is_hidden("#task-panel")
    assert httpx.get(f"{coordinator}/druid/indexer/v1/tasks", timeout=10).json() == before  # no task started
