"""SQL answers of large groupBys written from Arrow columns (strata.sql.arrow_answer) by a real
broker, in its merge worker and in its merge threads, against the same broker's old way (the
native answer parsed into rows, then encoded: taken when the result-level cache is to keep the
native answer) byte for byte in every result format, and against DuckDB over the raw rows."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import httpx
import pytest

from harness.processes import StrataProcess
from strata.ingestion.api import ingest
from strata.sql.formats import RESULT_FORMATS
from tests.cluster.cluster_kit import synthetic_spec, write_rows
from tests.sql_corpus.cluster import serving

pytestmark = pytest.mark.integration

ROWS = 6000
KEYS = 3500  # distinct `k`: a merged partial of thousands of groups
WORKER_ROWS = 3000  # merges of this many partial rows and more go to the merge worker
POOL = ["a", 'q"uote', "back\\slash", "new\nline", "tab\t", "comma,", "é", "日本", "😀", "\x00"]
NO_CACHE = {"useCache": False, "populateCache": False, "useResultLevelCache": False}
NEW = {**NO_CACHE, "populateResultLevelCache": False}  # nothing for the result cache: written from columns
OLD = {**NO_CACHE, "populateResultLevelCache": True}  # the native answer kept: rows, then encoded


def _rows() -> list[dict[str, Any]]:
    def nums(i: int) -> list[int | None] | None:
        return None if i % 11 == 0 else [i % 5, None, i % 3][: 1 + i % 3]

    def words(i: int) -> list[str | None] | None:
        return None if i % 13 == 0 else [POOL[i % len(POOL)], None if i % 4 == 0 else "w"]

    return [
        {"ts": f"2024-01-0{1 + i % 2}T{i % 24:02d}:{i % 60:02d}:00Z", "k": f"{POOL[i % len(POOL)]}{i % KEYS}",
         "n": i, "x": (i % 7) * 0.5, "nums": nums(i), "words": words(i)}
        for i in range(ROWS)
    ]  # fmt: skip


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[StrataProcess, Path]]:
    root = tmp_path_factory.mktemp("sql-arrow-answer")
    rows = write_rows(root / "rows" / "rows.json", _rows())
    dims = ["k", {"name": "n", "type": "long"}, {"name": "x", "type": "double"},
            {"name": "nums", "type": "auto"}, {"name": "words", "type": "auto"}]  # fmt: skip
    ingest(synthetic_spec("t", rows, "day", dimensions=dims), deep_storage=root / "deep", metadata=root / "meta.db",
           engine="local")  # fmt: skip
    workers = ["--merge-processes", "1", "--merge-process-rows", str(WORKER_ROWS), "--cache", "lru"]
    with serving(root, broker_args=workers) as broker:
        yield broker, rows


GROUPED = "SELECT k, nums, words, COUNT(*) AS c, SUM(n) AS s, SUM(x) AS sx, MAX(__time) AS latest FROM t"
STATEMENTS = {
    "merge worker": f"{GROUPED} GROUP BY k, nums, words",
    "merge thread": f"{GROUPED} WHERE n < 2600 GROUP BY k, nums, words",  # 2,600 groups: past the inline merge
    "hours in a zone, ordered and limited": "SELECT TIME_FLOOR(__time, 'PT1H') AS h, k, COUNT(*) AS c, "
    "MIN(n) > 100 AS late FROM t GROUP BY 1, 2 ORDER BY c DESC, k LIMIT 2500",
}


def _post(
    broker: StrataProcess, statement: str, fmt: str, header: bool, context: dict[str, Any]
) -> httpx.Response:
    body = {"query": statement, "resultFormat": fmt, "header": header, "typesHeader": header,
            "sqlTypesHeader": header, "context": {"sqlTimeZone": "America/New_York", **context}}  # fmt: skip
    resp = httpx.post(f"{broker.url}/druid/v2/sql/", json=body, timeout=60)
    assert resp.status_code == 200, resp.text
    return resp


@pytest.mark.parametrize("name", sorted(STATEMENTS))
def test_bodies_are_the_old_ways_bytes(cluster: tuple[StrataProcess, Path], name: str) -> None:
    broker, _ = cluster
    for fmt in RESULT_FORMATS:
        for header in (False, True):
            for stringify in (True, False):
                context = {"sqlStringifyArrays": stringify}
                new = _post(broker, STATEMENTS[name], fmt, header, {**NEW, **context})
                old = _post(broker, STATEMENTS[name], fmt, header, {**OLD, **context})
                assert new.content == old.content, (fmt, header, stringify)
                assert new.headers["content-type"] == old.headers["content-type"]
                assert len(new.content) > 50_000


def test_answer_is_duckdbs(cluster: tuple[StrataProcess, Path]) -> None:
    broker, rows = cluster
    resp = _post(broker, STATEMENTS["merge worker"], "array", False, {**NEW, "sqlStringifyArrays": False})
    got = resp.json()
    con = duckdb.connect()
    try:
        source = f"read_json('{rows}', format='newline_delimited', columns={{'ts': 'TIMESTAMPTZ', 'k': 'VARCHAR', " \
                 "'n': 'BIGINT', 'x': 'DOUBLE', 'nums': 'BIGINT[]', 'words': 'VARCHAR[]'})"  # fmt: skip
        con.execute("SET TimeZone='America/New_York'")
        expected = con.execute(
            f"SELECT k, nums, words, count(*), sum(n), sum(x), "
            f"strftime(max(ts), '%Y-%m-%dT%H:%M:%S.000') || '-05:00' FROM {source} GROUP BY ALL"
        ).fetchall()
    finally:
        con.close()
    assert len(got) > WORKER_ROWS
    assert Counter(json.dumps(r) for r in got) == Counter(json.dumps(list(r)) for r in expected)
