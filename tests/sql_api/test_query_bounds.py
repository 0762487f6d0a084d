"""Issue 36: no statement takes the broker, or its host, down. A real cluster (ZooKeeper, two
historicals, a broker with small engine limits) over the wikipedia sample, the broker's memory
watched all along: a three-way cross join, a recursive query, a deep window over a big join, a
timeout inside the broker's DuckDB, a timeout on the data nodes' scan, cancels mid-statement,
statements that try to reach files, extensions or settings. Each answer is Druid's error body;
the processes doing the work are seen to stop (their CPU time), and their memory to stay bounded."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from harness.proc_stats import cpu_used, memory_watchdog, peak_rss_bytes
from harness.processes import StrataProcess
from tests.cluster.cluster_kit import wikipedia_cluster
from tests.historical_query.wiki_http import RawRows

pytestmark = pytest.mark.integration

MiB = 1 << 20
BROKER_FLAGS = [
    "--query-memory", "64MiB", "--engine-memory", "128MiB", "--spill-bytes", "128MiB",
    "--max-subquery-bytes", "32MiB", "--max-scatter-gather-bytes", "64MiB", "--max-query-timeout", "120000",
    "--merge-threads", "2",
]  # fmt: skip
# what those flags let the broker hold: its DuckDB (128 MiB, and 2 merge threads' 64 MiB each), the
# subqueries' results (32 MiB of JSON, some four times that as Python values), a query's partials (64
# MiB as they arrive, and decoded), its own ~200 MiB; the
# module's statements peaked at 448 MiB (the three-way cross join took 23.7 GB before issue 36)
BROKER_LIMIT = 768 * MiB
# a scan whose filter costs each of the sample's rows milliseconds of a data node's CPU
SLOW_FILTER = "REGEXP_LIKE(LPAD(page, 30000, page), '([a-z]+[0-9]*)+Q')"
SLOW_NATIVE_FILTER = {
    "type": "expression",
    "expression": "regexp_like(lpad(page, 30000, page), '([a-z]+[0-9]*)+Q')",
}
# a statement whose one native stage is a small groupBy and whose DuckDB part runs for hours
ENGINE_HEAVY = (
    "WITH c AS (SELECT channel, COUNT(*) AS n FROM wikipedia GROUP BY channel) "
    "SELECT COUNT(*) AS x FROM c a, c b, c d, c e, c f, c g WHERE a.n + b.n + d.n + e.n + f.n + g.n = 7"
)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, zk_hosts: str, wikipedia_sample: Path,
            wikipedia_index_spec: Path) -> Iterator[dict[str, Any]]:  # fmt: skip
    root = tmp_path_factory.mktemp("bounds")
    spill = ["--spill-dir", str(root)]
    nodes = ["--query-memory", "256MiB", "--engine-memory", "512MiB", "--spill-bytes", "64MiB", *spill]
    with wikipedia_cluster(root, zk_hosts, wikipedia_sample, wikipedia_index_spec, historical_args=nodes,
                           broker_args=[*spill, *BROKER_FLAGS]) as c:  # fmt: skip
        yield c


@pytest.fixture
def broker(cluster: dict[str, Any]) -> Iterator[StrataProcess]:
    """The cluster's broker, its resident memory sampled while the test runs and held under
    BROKER_LIMIT; its engine idle again by the end."""
    process: StrataProcess = cluster["broker"]
    with memory_watchdog(process.pid, BROKER_LIMIT):
        yield process
    engine_idle(process)
    assert peak_rss_bytes(process.pid) <= BROKER_LIMIT


def sql(broker: StrataProcess, query: str, wait: float = 120, **context: Any) -> httpx.Response:
    """POST the statement with this context; `wait`: the client's own bound, in seconds."""
    return httpx.post(f"{broker.url}/druid/v2/sql", json={"query": query, "context": context}, timeout=wait)


def druid_error(resp: httpx.Response, status: int, error: str, category: str) -> str:
    """Druid's error body with this status, legacy error and category; its message."""
    assert resp.status_code == status, resp.text[:1000]
    body = resp.json()
    assert body["error"] == error and body["category"] == category, body
    assert {"errorMessage", "errorCode", "persona", "context"} <= set(body)
    message: str = body["errorMessage"]
    return message


def engine_idle(broker: StrataProcess, within: float = 10.0) -> None:
    """No SQL statement running and every slot of the broker's engine back (a slot returns once
    the DuckDB work of an interrupted statement has stopped)."""
    deadline = time.monotonic() + within
    while True:
        status = httpx.get(f"{broker.url}/status", timeout=10).json()
        if status["sqlEngine"]["busy"] == 0 and status["sqlStatements"] == 0:
            return
        assert time.monotonic() < deadline, f"the broker's engine is still busy: {status}"
        time.sleep(0.1)


def idle_cpu(processes: list[StrataProcess], seconds: float = 2.0) -> float:
    """CPU seconds the processes use together over `seconds`."""
    before = {p.pid: 0.0 for p in processes}
    threads = [threading.Thread(target=lambda p=p: before.__setitem__(p.pid, cpu_used(p.pid, seconds)))
               for p in processes]  # fmt: skip
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(before.values())


def settles(processes: list[StrataProcess], *, below: float, within: float = 20.0) -> bool:
    """Whether the processes use less than `below` CPU seconds in some one-second window within
    `within` seconds: interrupted work stops (a busy host may take a moment to land the cancel),
    work that was not runs on for hours."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if idle_cpu(processes, 1.0) < below:
            return True
    return False


def test_a_three_way_cross_join_is_druids_resource_limit(broker: StrataProcess) -> None:
    """The statement that took 23.7 GB: the subqueries' rows count together, so the third scan of
    39,244 rows passes maxSubqueryRows (100,000) and the statement ends there."""
    message = druid_error(
        sql(broker, "SELECT * FROM wikipedia, wikipedia, wikipedia"),
        400,
        "Resource limit exceeded",
        "CAPACITY_EXCEEDED",
    )
    assert "maximum[100000] rows" in message and "[maxSubqueryRows]" in message


def test_subquery_bytes_are_bounded_and_name_their_context_key(broker: StrataProcess) -> None:
    statement = "SELECT COUNT(*) AS n FROM wikipedia a JOIN wikipedia b ON a.page = b.page"
    message = druid_error(sql(broker, statement, maxSubqueryBytes=100_000), 400, "Resource limit exceeded",
                          "CAPACITY_EXCEEDED")  # fmt: skip
    assert "maximum[100000] bytes" in message and "[maxSubqueryBytes]" in message
    # a context cannot raise the broker's own ceiling (--max-subquery-bytes 32MiB): five scans of
    # the sample, about 9 MB of JSON each
    five = "SELECT * FROM wikipedia a, wikipedia b, wikipedia c, wikipedia d, wikipedia e"
    refused = sql(broker, five, maxSubqueryBytes=10**12, maxSubqueryRows=10**6)
    message = druid_error(refused, 400, "Resource limit exceeded", "CAPACITY_EXCEEDED")
    assert f"maximum[{32 * MiB}] bytes" in message and "--max-subquery-bytes" in message


def test_a_recursive_query_is_refused_before_any_work(broker: StrataProcess) -> None:
    statement = (
        "WITH RECURSIVE r(p) AS (SELECT page FROM wikipedia UNION ALL SELECT p FROM r) SELECT * FROM r"
    )
    queried = _segments_queried(broker)
    message = druid_error(sql(broker, statement), 400, "druidException", "INVALID_INPUT")
    assert "WITH RECURSIVE" in message
    assert _segments_queried(broker) == queried  # no native stage ran


def _segments_queried(broker: StrataProcess) -> float:
    text = httpx.get(f"{broker.url}/metrics", timeout=10).text
    return sum(
        float(line.split()[-1])
        for line in text.splitlines()
        if line.startswith("strata_broker_segments_queried_total")
    )


def test_a_deep_window_over_a_big_join_stays_within_the_engines_memory(broker: StrataProcess) -> None:
    """Some 100 million joined rows for one window: DuckDB spills up to --spill-bytes past its 64
    MiB, then refuses with Druid's 400 naming the broker's limits (or the statement's time runs out
    first on a slow machine); the broker's memory stays bounded either way."""
    statement = (
        "SELECT a.channel, ROW_NUMBER() OVER (PARTITION BY a.channel ORDER BY b.added, b.page) AS rn "
        "FROM wikipedia a JOIN wikipedia b ON a.channel = b.channel ORDER BY rn DESC LIMIT 5"
    )
    resp = sql(broker, statement, wait=180, timeout=90_000)
    if resp.status_code == 504:
        druid_error(resp, 504, "Query timeout", "TIMEOUT")
        return
    message = druid_error(resp, 400, "Resource limit exceeded", "CAPACITY_EXCEEDED")
    assert "--query-memory" in message and "64 MiB" in message


def test_a_timeout_inside_the_brokers_duckdb_interrupts_it(broker: StrataProcess) -> None:
    message = druid_error(sql(broker, ENGINE_HEAVY, timeout=8000), 504, "Query timeout", "TIMEOUT")
    assert "8000 ms" in message
    engine_idle(broker)  # the slot came back: DuckDB stopped
    assert settles([broker], below=0.25)  # and nothing of it goes on


def test_a_timeout_on_the_data_nodes_scan_stops_their_work(
    cluster: dict[str, Any], broker: StrataProcess
) -> None:
    historicals: list[StrataProcess] = cluster["historicals"]
    native = {"queryType": "scan", "dataSource": "wikipedia", "intervals": ["2015-09-12/2015-09-13"],
              "columns": ["page"], "filter": SLOW_NATIVE_FILTER, "context": {"timeout": 2000}}  # fmt: skip
    resp = httpx.post(f"{broker.url}/druid/v2/", json=native, timeout=60)
    druid_error(resp, 504, "Query timeout", "TIMEOUT")
    assert settles(historicals, below=0.25)  # hours of regular expressions, interrupted
    resp = sql(broker, f"SELECT COUNT(*) AS n FROM wikipedia WHERE {SLOW_FILTER}", timeout=2000)
    druid_error(resp, 504, "Query timeout", "TIMEOUT")
    assert resp.json()["context"]["sourceType"] == "sql"
    assert settles(historicals, below=0.25)


def test_a_data_nodes_query_past_its_memory_is_druids_resource_limit(broker: StrataProcess) -> None:
    """Grouped by 120,000-character values of its 35,143 pages: 4 GB, past a data node's 256 MiB
    per query and 64 MiB of spill however the 24 hourly segments split between the two nodes (with
    30,000 characters a node holding a seventh of the pages answered, some 230 MB the broker held);
    the node refuses with Druid's 400 naming its limits, the broker passes it on."""
    native = {"queryType": "groupBy", "dataSource": "wikipedia", "intervals": ["2015-09-12/2015-09-13"],
              "granularity": "all", "dimensions": ["wide"], "aggregations": [{"type": "count", "name": "n"}],
              "virtualColumns": [{"type": "expression", "name": "wide", "outputType": "STRING",
                                  "expression": "lpad(page, 120000, page)"}]}  # fmt: skip
    resp = httpx.post(f"{broker.url}/druid/v2/", json=native, timeout=120)
    message = druid_error(resp, 400, "Resource limit exceeded", "CAPACITY_EXCEEDED")
    assert "256 MiB" in message and "--query-memory" in message and "data node" in message


def test_partials_past_max_scatter_gather_bytes_are_druids_resource_limit(broker: StrataProcess) -> None:
    """Druid's maxScatterGatherBytes: partials are counted across the nodes as they arrive, so a
    query past it ends there, and the context may lower the broker's limit but never raise it."""
    native = {"queryType": "groupBy", "dataSource": "wikipedia", "intervals": ["2015-09-12/2015-09-13"],
              "granularity": "all", "dimensions": ["page"], "aggregations": [{"type": "count", "name": "n"}]}  # fmt: skip
    lowered = {**native, "context": {"maxScatterGatherBytes": 100_000}}
    resp = httpx.post(f"{broker.url}/druid/v2/", json=lowered, timeout=120)
    message = druid_error(resp, 400, "Resource limit exceeded", "CAPACITY_EXCEEDED")
    assert "max scatter-gather bytes limit reached" in message and "100000 bytes" in message
    statement = "SELECT page, COUNT(*) AS n FROM wikipedia GROUP BY page"
    message = druid_error(sql(broker, statement, maxScatterGatherBytes=100_000), 400, "Resource limit exceeded",
                          "CAPACITY_EXCEEDED")  # fmt: skip
    assert "max scatter-gather bytes limit reached" in message
    raised = {**native, "context": {"maxScatterGatherBytes": 128 * MiB}}
    message = druid_error(httpx.post(f"{broker.url}/druid/v2/", json=raised, timeout=120), 400, "druidException",
                          "INVALID_INPUT")  # fmt: skip
    assert (
        message
        == f"configured [maxScatterGatherBytes = {128 * MiB}] is more than enforced limit of [{64 * MiB}]."
    )
    answered = httpx.post(f"{broker.url}/druid/v2/", json=native, timeout=120)  # the same within the limit
    assert answered.status_code == 200 and len(answered.json()) == 35_143


@pytest.mark.parametrize("where", ["data nodes", "broker engine"])
def test_a_cancel_mid_statement_stops_it_where_it_runs(cluster: dict[str, Any], broker: StrataProcess,
                                                       where: str) -> None:  # fmt: skip
    statement = (
        f"SELECT COUNT(*) AS n FROM wikipedia WHERE {SLOW_FILTER}" if where == "data nodes" else ENGINE_HEAVY
    )
    working = cluster["historicals"] if where == "data nodes" else [broker]
    query_id = f"cancel-{uuid.uuid4().hex[:8]}"
    answer: list[httpx.Response] = []
    client = threading.Thread(target=lambda: answer.append(sql(broker, statement, sqlQueryId=query_id)))
    client.start()
    try:
        _wait_until_working(broker, where)
        assert httpx.delete(f"{broker.url}/druid/v2/sql/{query_id}", timeout=10).status_code == 202
    finally:
        client.join(60)
    assert answer, "the cancelled statement never answered"
    druid_error(answer[0], 500, "Query cancelled", "CANCELED")
    engine_idle(broker)
    assert settles(working, below=0.25)
    assert httpx.delete(f"{broker.url}/druid/v2/sql/{query_id}", timeout=10).status_code == 404


def _wait_until_working(broker: StrataProcess, where: str, within: float = 60) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        status = httpx.get(f"{broker.url}/status", timeout=10).json()
        if status["sqlStatements"] and (where == "data nodes" or status["sqlEngine"]["busy"]):
            time.sleep(1.0)  # well into it
            return
        time.sleep(0.05)
    raise AssertionError(f"the statement never reached the {where}")


def test_a_timeout_while_streaming_truncates_the_answer(broker: StrataProcess) -> None:
    """Druid's rule for a failure after the status is sent: the body ends short (no closing
    bracket), and the work stops."""
    statement = "SELECT a.page, b.page AS other FROM wikipedia a, wikipedia b"
    head, tail, size = b"", b"", 0
    with httpx.stream("POST", f"{broker.url}/druid/v2/sql", timeout=60,
                      json={"query": statement, "context": {"timeout": 4000}}) as resp:  # fmt: skip
        assert resp.status_code == 200
        for chunk in resp.iter_bytes():
            head, tail, size = head or chunk[:64], (tail + chunk)[-64:], size + len(chunk)
    assert head.startswith(b'[{"page":') and size > 4096
    assert not tail.endswith(b"]"), tail  # 1.5 billion rows: the deadline cut them short
    engine_idle(broker)


def test_a_client_that_stops_reading_lets_go_of_the_engine_at_the_deadline(broker: StrataProcess) -> None:
    """The answer's sending is bounded too: a client that reads the first bytes of a huge answer and
    then nothing holds the broker's engine slot only until the statement's deadline."""
    statement = "SELECT a.page, b.page AS other FROM wikipedia a, wikipedia b"
    with httpx.stream("POST", f"{broker.url}/druid/v2/sql", timeout=60,
                      json={"query": statement, "context": {"timeout": 3000}}) as resp:  # fmt: skip
        chunks = resp.iter_bytes()  # kept: a dropped iterator closes the response
        assert resp.status_code == 200 and next(chunks).startswith(b"[")
        status = httpx.get(f"{broker.url}/status", timeout=10).json()
        assert status["sqlEngine"]["busy"] == 1 and status["sqlStatements"] == 1
        engine_idle(broker, within=20)  # reading nothing meanwhile


SMUGGLED = [
    "SELECT * FROM read_csv('/etc/passwd')",
    "SELECT * FROM read_text('/etc/passwd')",
    "SELECT * FROM '/etc/passwd'",
    "SELECT (SELECT COUNT(*) FROM read_parquet('/etc/*')) AS n FROM wikipedia",
    "SELECT a.page FROM wikipedia a, read_csv_auto('/etc/passwd') p",
    "SELECT page FROM wikipedia WHERE page IN (SELECT * FROM read_text('/etc/passwd'))",
    "SELECT page FROM wikipedia UNION ALL SELECT content FROM read_text('/etc/passwd')",
    "SELECT * FROM glob('/etc/*')",
    "SELECT * FROM query_table('wikipedia')",
    "SELECT query('SELECT 1') AS q",
    "SELECT current_setting('memory_limit') AS m",
    "SELECT * FROM duckdb_settings()",
    "COPY (SELECT page FROM wikipedia) TO '/tmp/strata-smuggled.csv'",
    "ATTACH '/tmp/strata-smuggled.db' AS x",
    "INSTALL httpfs",
    "LOAD httpfs",
    "PRAGMA memory_limit='100GB'",
    "SELECT 1 AS one; SET memory_limit = '100GB'",
    "SELECT 1 AS one; PRAGMA threads=64",
    "RESET memory_limit",
    "CALL pragma_version()",
    "EXPORT DATABASE '/tmp/strata-smuggled'",
    "CREATE TABLE t AS SELECT * FROM wikipedia",
    "WITH x AS (SELECT * FROM read_csv('/etc/passwd')) SELECT * FROM x",
]


@pytest.mark.parametrize("statement", SMUGGLED)
def test_files_extensions_and_settings_are_out_of_reach(broker: StrataProcess, statement: str) -> None:
    resp = sql(broker, statement, wait=60)
    assert resp.status_code in (400, 501), resp.text[:500]
    body = resp.json()
    assert body["category"] in ("INVALID_INPUT", "UNSUPPORTED") and body["context"]["sourceType"] == "sql"
    assert "root:" not in resp.text and not Path("/tmp/strata-smuggled.csv").exists()


def test_a_set_statement_sets_druids_context_not_the_engine(
    broker: StrataProcess, wikipedia_sample: Path
) -> None:
    """`SET key = value;` is Druid's query context: DuckDB settings of that name change nothing, and
    a timeout set that way is held to the broker's maximum."""
    raw = RawRows(wikipedia_sample)
    (want,) = raw.conn.execute("SELECT COUNT(*) FROM raw r, raw s WHERE r.channel = '#ca.wikipedia' "
                               "AND s.channel = '#ca.wikipedia'").fetchone() or (None,)  # fmt: skip
    statement = ("SET memory_limit = '100GB'; SET enable_external_access = TRUE; SELECT COUNT(*) AS n "
                 "FROM wikipedia a, wikipedia b WHERE a.channel = '#ca.wikipedia' AND b.channel = '#ca.wikipedia'")  # fmt: skip
    resp = sql(broker, statement)
    assert resp.status_code == 200 and resp.json() == [{"n": want}], resp.text
    too_long = sql(broker, "SET timeout = 200000; SELECT 1 AS one")
    assert "maxQueryTimeout [120000]" in druid_error(too_long, 400, "druidException", "INVALID_INPUT")


def test_timeouts_past_the_brokers_maximum_are_druids_400(broker: StrataProcess) -> None:
    expected = "configured [timeout = 200000] is more than enforced limit of maxQueryTimeout [120000]."
    assert druid_error(sql(broker, "SELECT 1 AS one", **{"timeout": 200_000}), 400, "druidException",
                       "INVALID_INPUT") == expected  # fmt: skip
    native = {"queryType": "timeBoundary", "dataSource": "wikipedia", "context": {"timeout": 200_000}}
    resp = httpx.post(f"{broker.url}/druid/v2/", json=native, timeout=60)
    assert druid_error(resp, 400, "druidException", "INVALID_INPUT") == expected


def test_a_relational_answer_streams_in_batches_and_equals_duckdb(
    broker: StrataProcess, wikipedia_sample: Path
) -> None:
    """A join of some 60,000 rows: fifteen of the engine's Arrow batches, each turned into rows on
    its own; the whole equals DuckDB's over the raw sample."""
    raw = RawRows(wikipedia_sample)
    want = raw.conn.execute(
        'SELECT a.page, b.added FROM raw a JOIN raw b ON a."user" = b."user" '
        "WHERE a.channel = '#fr.wikipedia' AND b.channel = '#fr.wikipedia'"
    ).fetchall()
    statement = ("SELECT a.page, b.added FROM wikipedia a JOIN wikipedia b ON a.\"user\" = b.\"user\" "
                 "WHERE a.channel = '#fr.wikipedia' AND b.channel = '#fr.wikipedia'")  # fmt: skip
    resp = sql(broker, statement)
    assert resp.status_code == 200, resp.text[:500]
    got = orjson.loads(resp.content)
    assert len(got) == len(want) > 4096
    assert sorted((r["page"], r["added"]) for r in got) == sorted(want)
