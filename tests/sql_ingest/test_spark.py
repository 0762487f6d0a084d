"""SQL ingestion on Spark (`strata coordinator --engine spark`, local[2] here): a statement planned
block by block runs its per-row DuckDB stage inside the Spark job (with rollup into metrics); one
run whole by DuckDB in the task hands its result to the Spark job. Answers against DuckDB over the
raw rows."""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.cluster.cluster_kit import write_rows
from tests.coordinator.kit import TASKS
from tests.spark_kit import SPARK_CONF
from tests.sql_ingest.kit import Scene, eventually, oracle, report, run_sql, scene, sql_string

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

ROWS = [{"ts": f"2021-05-0{1 + h % 2}T{h % 24:02d}:{h % 60:02d}:00Z", "k": f"v{h % 5}", "n": h}
        for h in range(400)]  # fmt: skip


def _source(path: Path) -> str:
    files = sql_string(f'{{"type": "local", "files": ["{path}"]}}')
    return f'TABLE(EXTERN({files}, \'{{"type": "json"}}\')) EXTEND (ts VARCHAR, k VARCHAR, n BIGINT)'


@pytest.fixture(scope="module")
def sparked(tmp_path_factory: pytest.TempPathFactory, zk_hosts: str) -> Iterator[Scene]:
    pytest.importorskip("pyspark")
    root = tmp_path_factory.mktemp("sql_spark")
    conf = [arg for key, value in SPARK_CONF.items() for arg in ("--spark-conf", f"{key}={value}")]
    env = {"SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable)}
    with scene(root, zk_hosts, f"/sqlspark-{uuid.uuid4().hex[:8]}", "--engine", "spark",
               "--spark-master", "local[2]", *conf, env=env) as s:  # fmt: skip
        write_rows(root / "rows.json", ROWS)
        yield s


def test_rows_with_a_row_stage_and_rollup_run_in_the_spark_job(sparked: Scene) -> None:
    rows = sparked.root / "rows.json"
    status = run_sql(sparked.broker, f"""INSERT INTO spark_rollup
        SELECT TIME_FLOOR(TIME_PARSE(ts), 'PT1H') AS __time, UPPER(k) AS k, COUNT(*) AS cnt, SUM(n) AS n
        FROM {_source(rows)} WHERE n % 3 <> 0 GROUP BY 1, 2 PARTITIONED BY DAY""",
        {"finalizeAggregations": False})  # fmt: skip
    stage = report(sparked.broker.url, status["id"])["payload"]["stages"][0]["definition"]["processor"]
    assert stage["type"] == "scan" and "UPPER" in stage["statement"]  # block by block, not whole
    log = httpx.get(f"{sparked.coordinator.url}{TASKS}/task/{status['id']}/log", timeout=30).text
    assert "Spark's default log4j profile" in log  # the task's own Spark job ran it
    want = oracle("SELECT strftime(date_trunc('hour', ts::TIMESTAMP), '%Y-%m-%dT%H:%M:%S.000Z'), upper(k), "
                  "COUNT(*), SUM(n) FROM rows WHERE n % 3 <> 0 GROUP BY 1, 2 ORDER BY 1, 2", rows=rows)  # fmt: skip
    eventually(sparked.broker, "SELECT TIME_FORMAT(__time), k, SUM(cnt), SUM(n) FROM spark_rollup "
               "GROUP BY 1, 2 ORDER BY 1, 2", want, sparked.nodes)  # fmt: skip
    hours = oracle("SELECT COUNT(*) FROM (SELECT DISTINCT date_trunc('hour', ts::TIMESTAMP), upper(k) "
                   "FROM rows WHERE n % 3 <> 0)", rows=rows)  # fmt: skip
    eventually(sparked.broker, "SELECT COUNT(*) FROM spark_rollup", hours, sparked.nodes)  # rolled up


def test_a_statement_run_whole_feeds_the_spark_job(sparked: Scene) -> None:
    rows = sparked.root / "rows.json"
    status = run_sql(sparked.broker, f"""INSERT INTO spark_whole
        SELECT TIME_FLOOR(TIME_PARSE(ts), 'P1D') AS __time, k, COUNT(*) AS cnt, MAX(n) AS top
        FROM {_source(rows)} GROUP BY 1, 2 PARTITIONED BY ALL""")  # fmt: skip
    stage = report(sparked.broker.url, status["id"])["payload"]["stages"][0]["definition"]["processor"]
    assert stage["type"] == "duckdb"
    want = oracle("SELECT strftime(date_trunc('day', ts::TIMESTAMP), '%Y-%m-%dT%H:%M:%S.000Z'), k, COUNT(*), "
                  "MAX(n) FROM rows GROUP BY 1, 2 ORDER BY 1, 2", rows=rows)  # fmt: skip
    eventually(sparked.broker, "SELECT TIME_FORMAT(__time), k, cnt, top FROM spark_whole GROUP BY 1, 2, 3, 4 ORDER BY 1, 2",
               want, sparked.nodes)  # fmt: skip
