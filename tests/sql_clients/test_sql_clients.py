"""The clients Druid users already have, unmodified, against a real broker's SQL API.

pydruid's DB-API and SQLAlchemy dialect (introspection as the dialect issues it, `text()` queries,
pyformat parameters), the SQL Superset's Druid engine spec sends, and `strata sql` itself. Every
expected answer is DuckDB over the raw sample rows.
"""

from __future__ import annotations

import csv
import io
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from pydruid.db import connect

from tests.cluster.test_broker_cluster import cluster, raw  # noqa: F401 - the module's cluster fixture

pytestmark = pytest.mark.integration

DAY = "TIME_PARSE('2015-09-12T00:00:00') AND \"__time\" < TIME_PARSE('2015-09-13T00:00:00')"


def port(cluster: dict[str, Any]) -> int:  # noqa: F811
    return int(cluster["broker"].url.rsplit(":", 1)[1])


def test_dbapi_cursor_with_pyformat_parameters(cluster: dict[str, Any], wikipedia_sample: Path) -> None:  # noqa: F811
    conn = connect(host="127.0.0.1", port=port(cluster), path="/druid/v2/sql/", scheme="http")
    cursor = conn.cursor()
    cursor.execute(
        "SELECT channel, COUNT(*) AS edits FROM wikipedia WHERE channel = %(c)s OR channel = %(d)s "
        "GROUP BY channel ORDER BY channel",
        {"c": "#en.wikipedia", "d": "#fr.wikipedia"},
    )
    got = [(r.channel, r.edits) for r in cursor.fetchall()]
    want = raw("SELECT channel, count(*) FROM RAW WHERE channel IN ('#en.wikipedia', '#fr.wikipedia') "
               "GROUP BY 1 ORDER BY 1", wikipedia_sample)  # fmt: skip
    assert got == [tuple(w) for w in want]
    assert [d[0] for d in cursor.description] == ["channel", "edits"]


def test_sqlalchemy_introspection(cluster: dict[str, Any]) -> None:  # noqa: F811
    engine = sa.create_engine(f"druid://127.0.0.1:{port(cluster)}/druid/v2/sql/?header=true")
    inspector = sa.inspect(engine)
    assert "wikipedia" in inspector.get_table_names()
    assert "druid" in inspector.get_schema_names()
    columns = {c["name"]: c for c in inspector.get_columns("wikipedia")}
    assert isinstance(columns["__time"]["type"], sa.types.TIMESTAMP)
    assert isinstance(columns["channel"]["type"], sa.types.String)
    assert isinstance(columns["added"]["type"], sa.types.BigInteger)
    # the SQL the dialect's has_table sends (pydruid 0.6.9's has_table itself rejects SQLAlchemy 2's
    # info_cache argument before it sends anything)
    with engine.connect() as conn:
        exists = "SELECT COUNT(*) > 0 AS exists_ FROM INFORMATION_SCHEMA.TABLES WHERE TABLE_NAME = '{}'"
        assert conn.execute(sa.text(exists.format("wikipedia"))).fetchone().exists_ is True
        assert conn.execute(sa.text(exists.format("nope"))).fetchone().exists_ is False


def test_sqlalchemy_text_query_with_header(cluster: dict[str, Any], wikipedia_sample: Path) -> None:  # noqa: F811
    engine = sa.create_engine(f"druid://127.0.0.1:{port(cluster)}/druid/v2/sql/?header=true")
    with engine.connect() as conn:
        rows = conn.execute(sa.text(
            "SELECT page, COUNT(*) AS edits FROM wikipedia GROUP BY page ORDER BY edits DESC, page LIMIT 5"
        )).fetchall()  # fmt: skip
        assert conn.execute(sa.text("SELECT 1")).scalar() == 1
    want = raw("SELECT page, count(*) c FROM RAW GROUP BY 1 ORDER BY c DESC, page LIMIT 5", wikipedia_sample)
    assert [tuple(r) for r in rows] == [tuple(w) for w in want]


def test_superset_time_series_chart(cluster: dict[str, Any], wikipedia_sample: Path) -> None:  # noqa: F811
    """What Superset's Druid engine spec sends for an hourly line chart of edits."""
    sql = (
        'SELECT TIME_FLOOR(CAST("__time" AS TIMESTAMP), \'PT1H\') AS "__timestamp", COUNT(*) AS "count"\n'
        'FROM "druid"."wikipedia"\n'
        f'WHERE "__time" >= {DAY}\n'
        "GROUP BY TIME_FLOOR(CAST(\"__time\" AS TIMESTAMP), 'PT1H')\n"
        'ORDER BY "count" DESC\nLIMIT 10000'
    )
    engine = sa.create_engine(f"druid://127.0.0.1:{port(cluster)}/druid/v2/sql/?header=true")
    with engine.connect() as conn:
        got = {r[0]: r[1] for r in conn.execute(sa.text(sql))}
    want = raw("SELECT strftime(date_trunc('hour', time::TIMESTAMP), '%Y-%m-%dT%H:00:00.000Z'), count(*) "
               "FROM RAW GROUP BY 1", wikipedia_sample)  # fmt: skip
    assert got == dict(want)


def test_superset_table_chart_with_series_limit(cluster: dict[str, Any], wikipedia_sample: Path) -> None:  # noqa: F811
    """Superset without joins: a pre-query for the top groups, then the chart filtered on them."""
    engine = sa.create_engine(f"druid://127.0.0.1:{port(cluster)}/druid/v2/sql/?header=true")
    prequery = (
        'SELECT "channel" AS "channel", COUNT(*) AS "mme_inner__"\nFROM "druid"."wikipedia"\n'
        f'WHERE "__time" >= {DAY}\nGROUP BY "channel"\nORDER BY "mme_inner__" DESC\nLIMIT 5'
    )
    with engine.connect() as conn:
        top = [r[0] for r in conn.execute(sa.text(prequery))]
        in_list = ", ".join("'" + c.replace("'", "''") + "'" for c in top)
        chart = (
            'SELECT "channel" AS "channel", "isRobot" AS "isRobot", SUM("added") AS "SUM(added)"\n'
            'FROM "druid"."wikipedia"\n'
            f'WHERE "__time" >= {DAY} AND "channel" IN ({in_list})\n'
            'GROUP BY "channel", "isRobot"\nORDER BY "SUM(added)" DESC\nLIMIT 10000'
        )
        got = sorted((r[0], r[1], r[2]) for r in conn.execute(sa.text(chart)))
    want_top = [c for c, _ in raw("SELECT channel, count(*) c FROM RAW GROUP BY 1 ORDER BY c DESC LIMIT 5",
                                  wikipedia_sample)]  # fmt: skip
    assert top == want_top
    want = raw(f"SELECT channel, isRobot::VARCHAR, sum(added) FROM RAW WHERE channel IN ({in_list}) "
               "GROUP BY 1, 2", wikipedia_sample)  # fmt: skip
    assert got == sorted(tuple(w) for w in want)


def test_superset_virtual_dataset_and_type_probe(cluster: dict[str, Any], wikipedia_sample: Path) -> None:  # noqa: F811
    engine = sa.create_engine(f"druid://127.0.0.1:{port(cluster)}/druid/v2/sql/?header=true")
    virtual = "SELECT channel, added FROM wikipedia WHERE isRobot = 'true'"
    with engine.connect() as conn:
        total = conn.execute(sa.text(
            f"SELECT SUM(\"added\") AS \"sum\" FROM ({virtual}) AS virtual_table"
        )).scalar()  # fmt: skip
        probe = conn.execute(
            sa.text('SELECT "added" AS "x" FROM "wikipedia" WHERE channel = \'none\' LIMIT 1')
        )
        assert list(probe.keys()) == ["x"] and probe.fetchall() == []
    ((want,),) = raw("SELECT sum(added) FROM RAW WHERE isRobot", wikipedia_sample)
    assert total == want


def test_strata_sql_against_the_broker(cluster: dict[str, Any], wikipedia_sample: Path) -> None:  # noqa: F811
    argv = [
        sys.executable,
        "-m",
        "strata.cli.main",
        "sql",
        "--url",
        cluster["broker"].url,
        "--format",
        "csv",
        "-e",
        "SELECT channel, COUNT(*) AS edits FROM wikipedia GROUP BY channel ORDER BY edits DESC LIMIT 3",
    ]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    rows = list(csv.reader(io.StringIO(done.stdout)))
    want = raw("SELECT channel, count(*) c FROM RAW GROUP BY 1 ORDER BY c DESC LIMIT 3", wikipedia_sample)
    assert rows == [["channel", "edits"], *([c, str(n)] for c, n in want)]
    bad = subprocess.run([*argv[:-2], "-e", "SELECT nope FROM wikipedia"], capture_output=True, text=True,
                         timeout=60)  # fmt: skip
    assert bad.returncode == 1 and bad.stderr.startswith("Error: ") and len(bad.stderr.splitlines()) == 1
