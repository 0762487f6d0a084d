"""SQL-based ingestion end to end on a real cluster (ZooKeeper, a historical, a broker, a coordinator
the broker finds in ZooKeeper): each syntax form posted to `/druid/v2/sql/task`, run as a task, and
the broker's answers afterwards checked against DuckDB over the raw input files (never Strata's own
output); REPLACE replaces exactly its interval; a statement shut down at its publish publishes
nothing; faults and the task API's view of SQL tasks."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from contextlib import closing
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from strata.storage import open_metadata_store
from tests.cluster.cluster_kit import write_rows
from tests.coordinator.kit import TASKS, wait_publishing
from tests.sql_ingest.kit import (
    Scene,
    eventually,
    oracle,
    post_sql_task,
    report,
    run_sql,
    scene,
    select,
    sql_string,
    submit_sql,
    wait_task,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

DAYS = ["2020-01-01", "2020-01-02", "2020-01-03"]
ROWS = [{"ts": f"{d}T{h:02d}:{(h * 7) % 60:02d}:00Z", "k": f"v{(h + i) % 4}", "n": i * 1000 + h * 3,
         "x": None if h % 5 == 0 else h / 4} for i, d in enumerate(DAYS) for h in range(24)]  # fmt: skip
SIGNATURE = json.dumps([{"name": "ts", "type": "string"}, {"name": "k", "type": "string"},
                        {"name": "n", "type": "long"}, {"name": "x", "type": "double"}])  # fmt: skip
PER_DAY = (
    "SELECT strftime(date_trunc('day', ts::TIMESTAMP), '%Y-%m-%dT%H:%M:%S.000Z'), k, COUNT(*), SUM(n) "
    "FROM rows GROUP BY 1, 2 ORDER BY 1, 2"
)


def extern(path: Path, fmt: str = '{"type":"json"}', signature: str = SIGNATURE) -> str:
    source = json.dumps({"type": "local", "files": [str(path)]})
    return f"TABLE(EXTERN({sql_string(source)}, {sql_string(fmt)}, {sql_string(signature)}))"


def per_day(ds: str) -> str:
    return (f"SELECT TIME_FORMAT(TIME_FLOOR(__time, 'P1D')), k, COUNT(*), SUM(n) FROM {ds} "
            "GROUP BY 1, 2 ORDER BY 1, 2")  # fmt: skip


def segments(root: Path, ds: str) -> list[Any]:
    with closing(open_metadata_store(str(root / "meta.db"))) as store:
        return sorted(store.used_segments(ds), key=lambda s: (s.interval.start, s.partition_num))


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, zk_hosts: str) -> Iterator[Scene]:
    root = tmp_path_factory.mktemp("sql_ingest")
    with scene(root, zk_hosts, f"/sqlingest-{uuid.uuid4().hex[:8]}", hold=root / "hold") as s:
        write_rows(root / "rows.json", ROWS)
        yield s


def test_insert_from_extern_answers_as_the_raw_rows(world: Scene) -> None:
    rows = world.root / "rows.json"
    status = run_sql(world.broker, f'INSERT INTO ext_json SELECT TIME_PARSE("ts") AS __time, k, n, x '
                                   f"FROM {extern(rows)} PARTITIONED BY DAY")  # fmt: skip
    assert status["type"] == "query_controller" and status["dataSource"] == "ext_json"
    eventually(world.broker, per_day("ext_json"), oracle(PER_DAY, rows=rows), world.nodes)
    got = select(world.broker, "SELECT COUNT(*), COUNT(x), SUM(x) FROM ext_json")
    assert got == oracle("SELECT COUNT(*), COUNT(x), SUM(x) FROM rows", rows=rows)
    assert [str(s.interval) for s in segments(world.root, "ext_json")] == [
        f"{d}T00:00:00.000Z/{d[:-2]}{int(d[-2:]) + 1:02d}T00:00:00.000Z" for d in DAYS
    ]


def test_named_extern_with_extend_csv_expressions_and_where(world: Scene) -> None:
    csv = world.root / "rows.csv"
    csv.write_text("ts,k,n\n" + "".join(f"{r['ts']},{r['k']},{r['n']}\n" for r in ROWS))
    source = json.dumps({"type": "local", "baseDir": str(world.root), "filter": "rows.csv"})
    fmt = '{"type":"csv","findColumnsFromHeader":true}'
    status = run_sql(world.broker, f"""INSERT INTO ext_csv
        SELECT TIME_PARSE(ts) AS __time, UPPER(k) AS k_up, n * 2 AS n2, CONCAT(k, '-', CAST(n AS VARCHAR)) AS kn
        FROM TABLE(EXTERN(inputSource => {sql_string(source)}, inputFormat => {sql_string(fmt)}))
             EXTEND (ts VARCHAR, k VARCHAR, n BIGINT)
        WHERE MOD(n, 3) = 0 AND k <> 'v1'
        PARTITIONED BY HOUR""")  # fmt: skip
    # the WHERE runs block by block: every row is read, those it drops are not output
    counters = report(world.broker.url, status["id"])["payload"]["counters"]["0"]["0"]
    kept = oracle("SELECT COUNT(*) FROM rows WHERE n % 3 = 0 AND k <> 'v1'", rows=world.root / "rows.json")
    assert (counters["input0"]["rows"], counters["output"]["rows"]) == ([len(ROWS)], kept[0])
    want = oracle("SELECT upper(k), COUNT(*), SUM(n * 2), MIN(k || '-' || n::VARCHAR) FROM rows "
                  "WHERE n % 3 = 0 AND k <> 'v1' GROUP BY 1 ORDER BY 1", rows=world.root / "rows.json")  # fmt: skip
    eventually(world.broker, "SELECT k_up, COUNT(*), SUM(n2), MIN(kn) FROM ext_csv GROUP BY 1 ORDER BY 1",
               want, world.nodes)  # fmt: skip
    hours = {str(s.interval)[:13] for s in segments(world.root, "ext_csv")}
    assert len(hours) == len(oracle("SELECT DISTINCT date_trunc('hour', ts::TIMESTAMP) FROM rows "
                                    "WHERE n % 3 = 0 AND k <> 'v1'", rows=world.root / "rows.json"))  # fmt: skip


def test_inline_and_localfiles_table_functions_and_partitioning_forms(world: Scene) -> None:
    lines = [f"{r['ts']},{r['k']},{r['n']}" for r in ROWS[:30]]
    array = "ARRAY[" + ", ".join(sql_string(line) for line in lines) + "]"
    run_sql(world.broker, f"""INSERT INTO fn_inline SELECT TIME_PARSE(ts) AS __time, k, n
        FROM TABLE(inline(data => {array}, format => 'csv')) EXTEND (ts VARCHAR, k VARCHAR, n BIGINT)
        PARTITIONED BY 'P1D'""")  # fmt: skip
    part = world.root / "part.json"
    write_rows(part, ROWS[:30])
    files = sql_string(f"{part}")
    run_sql(world.broker, f"""INSERT INTO fn_local SELECT TIME_PARSE(ts) AS __time, k, n
        FROM TABLE(localfiles(files => ARRAY[{files}], format => 'json')) (ts VARCHAR, k VARCHAR, n BIGINT)
        PARTITIONED BY TIME_FLOOR(__time, 'PT6H')""")  # fmt: skip
    run_sql(world.broker, f"INSERT INTO fn_all SELECT k, n FROM {extern(part)} PARTITIONED BY ALL TIME")
    want = oracle("SELECT k, COUNT(*), SUM(n) FROM part GROUP BY 1 ORDER BY 1", part=part)
    for ds in ("fn_inline", "fn_local", "fn_all"):
        eventually(
            world.broker, f"SELECT k, COUNT(*), SUM(n) FROM {ds} GROUP BY 1 ORDER BY 1", want, world.nodes
        )
    assert {(s.interval.end - s.interval.start) // 3_600_000 for s in segments(world.root, "fn_local")} == {6}
    (only,) = segments(world.root, "fn_all")
    assert str(only.interval).startswith("-146136543") and select(
        world.broker, "SELECT MIN(__time) FROM fn_all"
    ) == [["1970-01-01T00:00:00.000Z"]]


@pytest.fixture
def http_rows(world: Scene) -> Iterator[str]:
    body = (world.root / "rows.json").read_bytes()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200 if self.path == "/rows.json" else 404)
            self.end_headers()
            self.wfile.write(body if self.path == "/rows.json" else b"")

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/rows.json"
    finally:
        server.shutdown()
        server.server_close()


def test_http_table_function(world: Scene, http_rows: str) -> None:
    run_sql(world.broker, f"""INSERT INTO fn_http SELECT TIME_PARSE(ts) AS __time, k, n
        FROM TABLE(http(uris => ARRAY[{sql_string(http_rows)}], format => 'json')) EXTEND (ts VARCHAR, k VARCHAR, n BIGINT)
        PARTITIONED BY DAY""")  # fmt: skip
    eventually(world.broker, per_day("fn_http"), oracle(PER_DAY, rows=world.root / "rows.json"), world.nodes)


def test_group_by_with_finalize_false_rolls_up_into_metrics(world: Scene) -> None:
    rows = world.root / "rows.json"
    run_sql(world.broker, f"""SET finalizeAggregations = false;
        INSERT INTO rolled
        SELECT TIME_FLOOR(TIME_PARSE(ts), 'PT6H') AS __time, k, COUNT(*) AS cnt, SUM(n) AS n_sum,
               MIN(n) AS n_min, MAX(x) AS x_max, COUNT(x) AS x_count,
               SUM(n) FILTER (WHERE k = 'v2') AS v2_sum
        FROM {extern(rows)} GROUP BY 1, 2 PARTITIONED BY DAY""")  # fmt: skip
    want = oracle("SELECT strftime(date_trunc('day', ts::TIMESTAMP), '%Y-%m-%dT%H:%M:%S.000Z'), k, COUNT(*), "
                  "SUM(n), MIN(n), MAX(x), COUNT(x) FROM rows GROUP BY 1, 2 ORDER BY 1, 2", rows=rows)  # fmt: skip
    eventually(world.broker, "SELECT TIME_FORMAT(TIME_FLOOR(__time, 'P1D')), k, SUM(cnt), SUM(n_sum), MIN(n_min), "
               "MAX(x_max), SUM(x_count) FROM rolled GROUP BY 1, 2 ORDER BY 1, 2", want, world.nodes)  # fmt: skip
    assert select(world.broker, "SELECT SUM(v2_sum) FROM rolled") == oracle(
        "SELECT SUM(n) FROM rows WHERE k = 'v2'", rows=rows
    )
    stored = oracle("SELECT COUNT(DISTINCT (date_trunc('hour', ts::TIMESTAMP) - INTERVAL (hour(ts::TIMESTAMP) % 6) "
                    "HOUR, k)) FROM rows", rows=rows)  # fmt: skip
    assert select(world.broker, "SELECT COUNT(*) FROM rolled") == stored  # one row per 6 hours and key
    meta = httpx.post(f"{world.broker.url}/druid/v2/", json={
        "queryType": "segmentMetadata", "dataSource": "rolled", "merge": True,
        "analysisTypes": ["rollup", "aggregators", "queryGranularity"]}, timeout=30).json()[0]  # fmt: skip
    assert meta["rollup"] is True and meta["aggregators"]["cnt"]["type"] == "longSum"
    assert meta["queryGranularity"] == {
        "type": "period",
        "period": "PT6H",
        "timeZone": "UTC",
        "origin": None,
    } or (meta["queryGranularity"] == "SIX_HOUR")


def test_group_by_finalized_stores_plain_columns_and_runs_whole(world: Scene) -> None:
    rows = world.root / "rows.json"
    task_id = submit_sql(world.broker, f"""INSERT INTO grouped
        SELECT TIME_FLOOR(TIME_PARSE(ts), 'P1D') AS __time, k, COUNT(*) AS cnt, AVG(n) AS n_avg,
               COUNT(DISTINCT n) AS n_distinct
        FROM {extern(rows)} GROUP BY 1, 2 HAVING COUNT(*) > 1 PARTITIONED BY DAY""")  # fmt: skip
    assert wait_task(world.broker.url, task_id)["statusCode"] == "SUCCESS"
    assert (
        report(world.broker.url, task_id)["payload"]["stages"][0]["definition"]["processor"]["type"]
        == "duckdb"
    )
    want = oracle("SELECT strftime(date_trunc('day', ts::TIMESTAMP), '%Y-%m-%dT%H:%M:%S.000Z'), k, COUNT(*), AVG(n), "
                  "COUNT(DISTINCT n) FROM rows GROUP BY 1, 2 HAVING COUNT(*) > 1 ORDER BY 1, 2", rows=rows)  # fmt: skip
    eventually(world.broker, "SELECT TIME_FORMAT(__time), k, cnt, n_avg, n_distinct FROM grouped GROUP BY 1, 2, 3, 4, 5 ORDER BY 1, 2",
               want, world.nodes)  # fmt: skip


def test_reindexing_reads_a_data_source(world: Scene) -> None:
    rows = world.root / "rows.json"
    run_sql(world.broker, f'INSERT INTO src SELECT TIME_PARSE("ts") AS __time, k, n FROM {extern(rows)} '
                          "PARTITIONED BY DAY")  # fmt: skip
    eventually(world.broker, per_day("src"), oracle(PER_DAY, rows=rows), world.nodes)
    run_sql(world.broker, """INSERT INTO copy SELECT __time, k, n + 1 AS n FROM src
        WHERE __time >= TIMESTAMP '2020-01-02' AND k <> 'v3' PARTITIONED BY HOUR""")  # fmt: skip
    want = oracle("SELECT k, COUNT(*), SUM(n + 1) FROM rows WHERE ts::TIMESTAMP >= TIMESTAMP '2020-01-02' "
                  "AND k <> 'v3' GROUP BY 1 ORDER BY 1", rows=rows)  # fmt: skip
    eventually(world.broker, "SELECT k, COUNT(*), SUM(n) FROM copy GROUP BY 1 ORDER BY 1", want, world.nodes)
    lookup = world.root / "lookup.json"
    write_rows(lookup, [{"k": f"v{i}", "label": f"label-{i}"} for i in range(3)])
    lookup_sig = json.dumps([{"name": "k", "type": "string"}, {"name": "label", "type": "string"}])
    run_sql(
        world.broker,
        f"""INSERT INTO joined SELECT s.__time, s.k, l.label, s.n
        FROM src AS s LEFT JOIN {extern(lookup, signature=lookup_sig)} AS l ON s.k = l.k PARTITIONED BY DAY""",
    )
    want = oracle("SELECT r.k, l.label, COUNT(*), SUM(r.n) FROM rows r LEFT JOIN lookup l ON r.k = l.k "
                  "GROUP BY 1, 2 ORDER BY 1, 2", rows=rows, lookup=lookup)  # fmt: skip
    eventually(world.broker, "SELECT k, label, COUNT(*), SUM(n) FROM joined GROUP BY 1, 2 ORDER BY 1, 2",
               want, world.nodes)  # fmt: skip


def test_replace_overwrite_where_replaces_only_its_interval(world: Scene) -> None:
    rows = world.root / "rows.json"
    run_sql(world.broker, f'INSERT INTO repl SELECT TIME_PARSE("ts") AS __time, k, n FROM {extern(rows)} '
                          "PARTITIONED BY DAY")  # fmt: skip
    eventually(world.broker, per_day("repl"), oracle(PER_DAY, rows=rows), world.nodes)
    before = {str(s.interval): s.id for s in segments(world.root, "repl")}
    run_sql(world.broker, f"""REPLACE INTO repl
        OVERWRITE WHERE __time >= TIMESTAMP '2020-01-02' AND __time < TIMESTAMP '2020-01-03'
        SELECT TIME_PARSE("ts") AS __time, k, n FROM {extern(rows)}
        WHERE TIME_PARSE("ts") >= TIMESTAMP '2020-01-02' AND TIME_PARSE("ts") < TIMESTAMP '2020-01-03' AND k = 'v0'
        PARTITIONED BY DAY""")  # fmt: skip
    want = oracle("SELECT strftime(date_trunc('day', ts::TIMESTAMP), '%Y-%m-%dT%H:%M:%S.000Z'), k, COUNT(*), SUM(n) "
                  "FROM rows WHERE strftime(ts::TIMESTAMP, '%Y-%m-%d') <> '2020-01-02' OR k = 'v0' GROUP BY 1, 2 ORDER BY 1, 2", rows=rows)  # fmt: skip
    eventually(world.broker, per_day("repl"), want, world.nodes)
    after = {str(s.interval): s.id for s in segments(world.root, "repl")}
    day2 = "2020-01-02T00:00:00.000Z/2020-01-03T00:00:00.000Z"
    assert {k: v for k, v in after.items() if k != day2} == {k: v for k, v in before.items() if k != day2}
    assert after[day2] != before[day2]
    run_sql(world.broker, "REPLACE INTO repl OVERWRITE ALL SELECT __time, k, n FROM repl WHERE k = 'v1' "
                          "PARTITIONED BY ALL")  # fmt: skip
    want = oracle("SELECT k, COUNT(*), SUM(n) FROM rows WHERE k = 'v1' AND strftime(ts::TIMESTAMP, '%Y-%m-%d') <> '2020-01-02' "
                  "GROUP BY 1 ORDER BY 1", rows=rows)  # fmt: skip
    eventually(world.broker, "SELECT k, COUNT(*), SUM(n) FROM repl GROUP BY 1 ORDER BY 1", want, world.nodes)
    assert len(segments(world.root, "repl")) == 1


def test_a_statement_shut_down_at_its_publish_publishes_nothing(world: Scene) -> None:
    hold = world.root / "hold"
    (hold / "hold").write_text("")
    try:
        task_id = submit_sql(world.broker, f'INSERT INTO halted SELECT TIME_PARSE("ts") AS __time, k, n '
                                           f"FROM {extern(world.root / 'rows.json')} PARTITIONED BY DAY")  # fmt: skip
        wait_publishing(hold, 1)
        resp = httpx.post(f"{world.broker.url}{TASKS}/task/{task_id}/shutdown", timeout=30)
        assert resp.status_code == 200 and resp.json() == {"task": task_id}
        status = wait_task(world.broker.url, task_id)
        assert status["statusCode"] == "FAILED" and status["errorMsg"] == "Shutdown request from user"
    finally:
        (hold / "hold").unlink()
        for marker in hold.glob("publishing-*"):
            marker.unlink()
    assert segments(world.root, "halted") == []
    with closing(open_metadata_store(str(world.root / "meta.db"))) as store:
        assert store.segments("halted", include_unused=True) == []


def test_runtime_faults_fail_the_task_and_publish_nothing(world: Scene) -> None:
    bad = world.root / "bad.json"
    write_rows(bad, [*ROWS[:3], {"ts": "not a time", "k": "v9", "n": 1, "x": None}])
    task_id = submit_sql(world.broker, f'INSERT INTO faulty SELECT TIME_PARSE("ts") AS __time, k, n '
                                       f"FROM {extern(bad)} PARTITIONED BY DAY")  # fmt: skip
    status = wait_task(world.broker.url, task_id)
    assert status["statusCode"] == "FAILED" and status["errorMsg"].startswith("InsertTimeNull: ")
    error = report(world.broker.url, task_id)["payload"]["status"]["errorReport"]["error"]
    assert error["errorCode"] == "InsertTimeNull"
    task_id = submit_sql(
        world.broker,
        f"""REPLACE INTO faulty
        OVERWRITE WHERE __time >= TIMESTAMP '2020-01-01' AND __time < TIMESTAMP '2020-01-02'
        SELECT TIME_PARSE("ts") AS __time, k FROM {extern(world.root / "rows.json")} PARTITIONED BY DAY""",
    )
    status = wait_task(world.broker.url, task_id)
    assert status["statusCode"] == "FAILED" and status["errorMsg"].startswith("InsertTimeOutOfBounds: ")
    error = report(world.broker.url, task_id)["payload"]["status"]["errorReport"]["error"]
    assert error["interval"] == "2020-01-02T00:00:00.000Z/2020-01-03T00:00:00.000Z"
    assert segments(world.root, "faulty") == []


def test_sql_tasks_in_the_task_api(world: Scene) -> None:
    sql = f'INSERT INTO listed SELECT TIME_PARSE("ts") AS __time, k FROM {extern(world.root / "rows.json")} PARTITIONED BY DAY'
    task_id = submit_sql(world.broker, sql, {"sqlQueryId": "my-insert-1"})
    assert task_id == "query-my-insert-1"
    assert wait_task(world.broker.url, task_id)["statusCode"] == "SUCCESS"
    listed = httpx.get(f"{world.broker.url}{TASKS}/tasks", params={"datasource": "listed"}, timeout=30).json()
    assert [(t["id"], t["type"], t["statusCode"]) for t in listed] == [
        (task_id, "query_controller", "SUCCESS")
    ]
    payload = httpx.get(f"{world.broker.url}{TASKS}/task/{task_id}", timeout=30).json()["payload"]
    assert payload["sqlQuery"] == sql and payload["sqlQueryContext"]["sqlInsertSegmentGranularity"] == '"DAY"'
    msq = report(world.broker.url, task_id)
    assert msq["taskId"] == task_id and msq["payload"]["status"]["status"] == "SUCCESS"
    counters = msq["payload"]["counters"]
    assert (
        counters["0"]["0"]["input0"]["rows"] == [len(ROWS)]
        and counters["1"]["0"]["segments"]["published"] == 3
    )
    again = post_sql_task(world.broker, sql, {"sqlQueryId": "my-insert-1"})  # the id is taken
    assert again.status_code == 400 and again.json()["state"] == "FAILED"
    explained = post_sql_task(world.broker, "EXPLAIN PLAN FOR " + sql)
    assert explained.status_code == 200
    (row,) = explained.json()
    assert json.loads(row["RESOURCES"]) == [{"name": "EXTERNAL", "type": "EXTERNAL"},
                                            {"name": "listed", "type": "DATASOURCE"}]  # fmt: skip
    assert json.loads(row["ATTRIBUTES"]) == {"statementType": "INSERT", "targetDataSource": "listed",
                                             "partitionedBy": "DAY"}  # fmt: skip
    assert httpx.get(f"{world.broker.url}/druid/v2/sql/task/enabled", timeout=30).json() == {"enabled": True}


def _statements(rows: Path) -> list[tuple[str, dict[str, Any], int, str]]:
    """(statement, context, HTTP status, a piece of Druid's message) of statements Druid refuses."""
    ext = extern(rows)
    no_sig = f'TABLE(EXTERN({sql_string(json.dumps({"type": "local", "files": [str(rows)]}))}, \'{{"type":"json"}}\'))'
    select = f'SELECT TIME_PARSE("ts") AS __time, k FROM {ext}'
    day = "PARTITIONED BY DAY"
    return [
        (f"INSERT INTO dst {select}", {}, 400,
         "Operation [INSERT] requires a PARTITIONED BY to be explicitly defined, but none was found."),
        (f"REPLACE INTO dst {select} {day}", {}, 400, "Missing time chunk information in OVERWRITE clause for REPLACE"),
        (f"INSERT INTO dst OVERWRITE ALL {select} {day}", {}, 400, "An OVERWRITE clause is not allowed with INSERT"),
        (f"INSERT INTO dst {select} CLUSTERED BY k {day}", {}, 400, "CLUSTERED BY found before PARTITIONED BY"),
        (f"INSERT INTO dst {select} PARTITIONED BY 'invalid_granularity'", {}, 400,
         "Invalid granularity['invalid_granularity'] specified after PARTITIONED BY clause. Expected 'SECOND'"),
        (f"INSERT INTO dst {select} ORDER BY k {day}", {}, 400,
         "Cannot use an ORDER BY clause on a Query of type [INSERT], use CLUSTERED BY instead"),
        (f"INSERT INTO dst SELECT k || 'x' FROM {ext} PARTITIONED BY ALL", {}, 400,
         "Insertion requires columns to be named"),
        (f"INSERT INTO dst SELECT k, n AS k FROM {ext} PARTITIONED BY ALL", {}, 400, "Duplicate field in SELECT: [k]"),
        (f"INSERT INTO dst SELECT ts AS __time FROM {ext} {day}", {}, 400,
         "Field [__time] was the wrong type [VARCHAR], expected TIMESTAMP"),
        (f"INSERT INTO dst SELECT k FROM {ext} {day}", {}, 400, "must specify a time column (named __time)"),
        (f'INSERT INTO "in/valid" {select} {day}', {}, 400,
         "Invalid value for field [table]: Value [in/valid] cannot contain '/'."),
        (f"INSERT INTO dst (a, b) {select} {day}", {}, 400, "Operation [INSERT] cannot be run with a target column list"),
        (f"INSERT INTO INFORMATION_SCHEMA.COLUMNS {select} {day}", {}, 400,
         "Table [INFORMATION_SCHEMA.COLUMNS] does not support operation [INSERT] because it is not a Druid datasource"),
        ("INSERT INTO dst SELECT * FROM INFORMATION_SCHEMA.COLUMNS PARTITIONED BY ALL", {}, 400, "Cannot query table(s)"),
        (f"INSERT INTO dst SELECT * FROM {no_sig} PARTITIONED BY ALL", {}, 400,
         "EXTERN requires either a [signature] value or an EXTEND clause"),
        (f"INSERT INTO dst SELECT * FROM {ext} EXTEND (k VARCHAR) PARTITIONED BY ALL", {}, 400,
         "but not both"),
        (f"REPLACE INTO dst OVERWRITE WHERE __time >= TIMESTAMP '2020-01-01 06:00' {select} {day}", {}, 400,
         "which is not aligned with PARTITIONED BY granularity [{type=period, period=P1D, timeZone=UTC, origin=null}]"),
        (f"REPLACE INTO dst OVERWRITE WHERE k = 'x' {select} {day}", {}, 400,
         "OVERWRITE WHERE clause only supports filtering on the __time column"),
        (f"INSERT INTO dst {select} LIMIT 5 {day}", {}, 400,
         'INSERT and REPLACE queries cannot have a LIMIT unless PARTITIONED BY is "ALL".'),
        (f"INSERT INTO dst {select} {day}", {"sqlInsertSegmentGranularity": '"DAY"'}, 400,
         "Query context parameter [sqlInsertSegmentGranularity] is not allowed"),
        (f"INSERT INTO dst {select} CLUSTERED BY k DESC".replace("CLUSTERED", f"{day} CLUSTERED"), {}, 400,
         "cannot sort in descending order"),
        (f"UPSERT INTO dst {select} {day}", {}, 400, "UPSERT is not supported."),
        (f"INSERT INTO dst SELECT * FROM nope {day}", {}, 400, "Object 'nope' not found"),
        (f"INSERT INTO dst SELECT * FROM TABLE(EXTERN('{{bad json', '{{}}', '[]')) {day}", {}, 400,
         "Invalid value for the field [inputSource]"),
        (f"INSERT INTO dst SELEC k FROM {ext} {day}", {}, 400, ""),
        ("SELECT 1", {}, 501, "send SELECT statements to /druid/v2/sql"),
        ("INSERT INTO dst SELECT * FROM TABLE(EXTERN('{\"type\":\"hdfs\"}', '{\"type\":\"json\"}', "
         "'[{\"name\":\"k\",\"type\":\"string\"}]')) PARTITIONED BY ALL", {}, 400, "inputSource type 'hdfs'"),
    ]  # fmt: skip


def test_statements_druid_refuses_are_4xx_with_druid_s_body(world: Scene) -> None:
    for sql, context, status, message in _statements(world.root / "rows.json"):
        resp = post_sql_task(world.broker, sql, context)
        body = resp.json()
        assert resp.status_code == status, (sql, resp.status_code, body)
        assert set(body) == {"taskId", "state", "error"} and body["state"] == "FAILED", (sql, body)
        error = body["error"]
        assert {"error", "errorCode", "persona", "category", "errorMessage"} <= set(error), (sql, error)
        assert message in error["errorMessage"], (sql, error["errorMessage"])
        assert error["category"] == ("UNSUPPORTED" if status == 501 else "INVALID_INPUT"), (sql, error)
    refused = httpx.post(f"{world.broker.url}/druid/v2/sql/", json={"query": "INSERT INTO x SELECT 1 PARTITIONED BY ALL"},
                         timeout=30)  # fmt: skip
    assert refused.status_code == 400 and refused.json()["errorMessage"] == (
        "INSERT operations are not supported by requested SQL engine [native], consider using MSQ."
    )
    listed = httpx.get(f"{world.broker.url}{TASKS}/tasks", params={"datasource": "dst"}, timeout=30).json()
    assert listed == []  # none of them became a task


def strata_sql(world: Scene, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "strata.cli.main", "sql", "--url", world.broker.url, *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=300)


def test_strata_sql_submits_and_waits_for_the_task(world: Scene) -> None:
    rows = world.root / "rows.json"
    sql = (
        f'INSERT INTO from_cli SELECT TIME_PARSE("ts") AS __time, k, n FROM {extern(rows)} PARTITIONED BY DAY'
    )
    done = strata_sql(world, "--format", "csv", "-e", sql)
    assert done.returncode == 0, done.stderr
    (header, line) = list(csv.reader(io.StringIO(done.stdout)))
    assert header == ["taskId", "state", "dataSource", "rows", "segments", "durationMs", "errorMsg"]
    assert line[1:5] == ["SUCCESS", "from_cli", str(len(ROWS)), "3"] and line[0].startswith("query-")
    eventually(world.broker, per_day("from_cli"), oracle(PER_DAY, rows=rows), world.nodes)
    submitted = strata_sql(
        world, "--format", "csv", "--no-header", "--no-wait", "-e", sql.replace("from_cli", "nowait")
    )
    assert submitted.returncode == 0, submitted.stderr
    task_id, state = submitted.stdout.strip().split(",")
    assert state == "RUNNING" and wait_task(world.broker.url, task_id)["statusCode"] == "SUCCESS"
    untimed = write_rows(world.root / "untimed.json", [{"ts": "never", "k": "v9", "n": 1}])
    bad = strata_sql(world, "-e", sql.replace(f"FROM {extern(rows)}", f"FROM {extern(untimed)}")
                     .replace("from_cli", "cli_fault"))  # fmt: skip
    assert bad.returncode == 1 and "InsertTimeNull" in bad.stderr
    refused = strata_sql(world, "-e", sql.replace("PARTITIONED BY DAY", ""))
    assert refused.returncode == 1 and "requires a PARTITIONED BY" in refused.stderr
