"""Clients with credentials against the secured cluster: `strata sql --user` (password from the
environment, ~/.netrc; none without a terminal is an error), pydruid's DB-API and SQLAlchemy
dialect, and the Spark reader. Answers checked against the rows written (plain Python)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.security.secured_cluster import ROWS, Secured

pytestmark = pytest.mark.integration

TOTAL = sum(r["n"] for r in ROWS)
SQL = "SELECT SUM(n) AS s FROM wikipedia"


def _strata_sql(
    c: Secured, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k != "STRATA_PASSWORD"}
    return subprocess.run([sys.executable, "-m", "strata.cli.main", "sql", "--url", c.broker.url, "--format", "csv",
                           *args], env={**base, **(env or {})}, capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)  # fmt: skip


def test_strata_sql_password_from_the_environment(cluster: Secured) -> None:
    done = _strata_sql(
        cluster, "--user", "alice", "-e", SQL, env={"STRATA_PASSWORD": cluster.passwords["alice"]}
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["s", str(TOTAL)]
    refused = _strata_sql(cluster, "--user", "alice", "-e", "SELECT COUNT(*) FROM wikipedia_live",
                          env={"STRATA_PASSWORD": cluster.passwords["alice"]})  # fmt: skip
    assert refused.returncode == 1 and "FORBIDDEN" in refused.stderr


def test_strata_sql_password_from_netrc(cluster: Secured, tmp_path: Path) -> None:
    netrc = tmp_path / ".netrc"
    netrc.write_text(f"machine 127.0.0.1 login alice password {cluster.passwords['alice']}\n")
    netrc.chmod(0o600)
    done = _strata_sql(cluster, "--user", "alice", "-e", SQL, env={"HOME": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["s", str(TOTAL)]
    anyone = _strata_sql(cluster, "-e", SQL, env={"HOME": str(tmp_path)})  # no --user: the netrc's login
    assert anyone.returncode == 0, anyone.stderr


def test_strata_sql_refusals(cluster: Secured, tmp_path: Path) -> None:
    wrong = _strata_sql(cluster, "--user", "alice", "-e", SQL, env={"STRATA_PASSWORD": "wrong"})
    assert wrong.returncode == 1 and "UNAUTHORIZED" in wrong.stderr
    none = _strata_sql(cluster, "--user", "alice", "-e", SQL, env={"HOME": str(tmp_path)})
    assert none.returncode == 2 and "no password for alice" in none.stderr
    anonymous = _strata_sql(cluster, "-e", SQL, env={"HOME": str(tmp_path)})
    assert anonymous.returncode == 1 and "UNAUTHORIZED" in anonymous.stderr


def test_pydruid_dbapi_and_sqlalchemy(cluster: Secured) -> None:
    from pydruid.db import connect
    from sqlalchemy import create_engine, text

    host, port = cluster.broker.address.split(":")
    conn = connect(host=host, port=int(port), path="/druid/v2/sql/", scheme="http", user="alice",
                   password=cluster.passwords["alice"])  # fmt: skip
    cur = conn.cursor()
    cur.execute(SQL)
    assert [tuple(r) for r in cur.fetchall()] == [(TOTAL,)]
    engine = create_engine(f"druid://alice:{cluster.passwords['alice']}@{host}:{port}/druid/v2/sql/")
    with engine.connect() as c:
        assert c.execute(text(SQL)).fetchall() == [(TOTAL,)]
    bad = create_engine(f"druid://alice:wrong@{host}:{port}/druid/v2/sql/")
    with pytest.raises(Exception, match=r"401|Unauthorized|UNAUTHORIZED"), bad.connect() as c:
        c.execute(text(SQL)).fetchall()


def test_spark_reader_with_user_and_password(cluster: Secured) -> None:
    from harness.spark_session import local_session

    spark = local_session("strata-security-tests")
    try:
        df = (spark.read.format("strata").option("broker", cluster.broker.url).option("datasource", "wikipedia")
              .option("user", "alice").option("password", cluster.passwords["alice"]).load())  # fmt: skip
        assert sum(r["n"] for r in df.select("n").collect()) == TOTAL
        sql = (spark.read.format("strata").option("broker", cluster.broker.url).option("sql", SQL)
               .option("user", "alice").option("password", cluster.passwords["alice"]).load())  # fmt: skip
        assert sql.collect()[0]["s"] == TOTAL
        refused = (spark.read.format("strata").option("broker", cluster.broker.url)
                   .option("datasource", "wikipedia_live").option("user", "alice")
                   .option("password", cluster.passwords["alice"]))  # fmt: skip
        with pytest.raises(Exception, match=r"unknown datasource 'wikipedia_live'.*\(it has: wikipedia\)"):
            refused.load().collect()  # forbidden looks exactly like missing
    finally:
        spark.stop()
