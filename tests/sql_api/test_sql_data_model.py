"""Druid SQL over multi-value strings, arrays and nested values, through a real historical and
broker: UNNEST, grouping, MV_ / ARRAY_ / JSON_ functions, ARRAY_AGG / STRING_AGG and the catalog's
types, checked against DuckDB over the raw rows with Druid's documented rules written as SQL
(`multi-value-dimensions.md`: a row with no value is one null value, a filter matches a row when
any value does, grouping counts each value; `arrays.md`: arrays are whole values).
"""

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
from tests.cluster.cluster_kit import synthetic_spec, write_rows
from tests.sql_corpus.cluster import serving

pytestmark = pytest.mark.integration

TAGS = [["a", "b"], ["b", "c", "a"], [], None, ["c"], ["d", None]]
NUMS = [[1, 2], [2, 2, 3], None, [], [5], [None, 1]]


def _rows() -> list[dict[str, Any]]:
    return [
        {"ts": f"2024-01-0{1 + i % 2}T00:00:{i:02d}Z", "k": f"k{i % 3}", "n": i, "tags": TAGS[i % 6],
         "nums": NUMS[i % 6], "doc": {"a": i, "b": {"c": f"v{i % 2}"}, "l": [i, i + 1]}}
        for i in range(24)
    ]  # fmt: skip


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[StrataProcess, Path]]:
    root = tmp_path_factory.mktemp("sql-data-model")
    rows = write_rows(root / "rows" / "rows.json", _rows())
    dims = ["k", {"name": "n", "type": "long"}, {"name": "tags", "type": "string", "multiValueHandling": "ARRAY"},
            {"name": "nums", "type": "auto"}, {"name": "doc", "type": "json"}]  # fmt: skip
    spec = synthetic_spec("dm", rows, "day", dimensions=dims)
    ingest(spec, deep_storage=root / "deep", metadata=root / "meta.db", engine="local")
    with serving(root) as broker:
        yield broker, rows


def sql(broker: StrataProcess, statement: str, **context: Any) -> list[list[Any]]:
    body = {"query": statement, "resultFormat": "array", "context": {"sqlStringifyArrays": False, **context}}
    resp = httpx.post(f"{broker.url}/druid/v2/sql/", json=body, timeout=60)
    assert resp.status_code == 200, resp.text
    rows: list[list[Any]] = resp.json()
    return rows


def refused(broker: StrataProcess, statement: str) -> str:
    resp = httpx.post(f"{broker.url}/druid/v2/sql/", json={"query": statement}, timeout=60)
    assert resp.status_code == 400, resp.text
    return str(resp.json()["errorMessage"])


def oracle(rows: Path, statement: str) -> list[tuple[Any, ...]]:
    """DuckDB over the raw rows; `VALUES_OF(tags)` is a multi-value row's values (none: one null)."""
    con = duckdb.connect()
    try:
        con.execute("SET TimeZone='UTC'")
        source = f"read_json('{rows}', format='newline_delimited', columns={{'ts': 'VARCHAR', 'k': 'VARCHAR', " \
                 "'n': 'BIGINT', 'tags': 'VARCHAR[]', 'nums': 'BIGINT[]', 'doc': 'JSON'})"  # fmt: skip
        text = statement.replace("RAW", source).replace(
            "VALUES_OF(tags)", "(CASE WHEN len(tags) > 0 THEN tags ELSE [NULL] END)"
        )
        return con.execute(text).fetchall()
    finally:
        con.close()


def counted(rows: list[list[Any]] | list[tuple[Any, ...]]) -> Counter[str]:
    return Counter(json.dumps(list(r)) for r in rows)


def test_unnest_of_a_multi_value_column(cluster: tuple[StrataProcess, Path]) -> None:
    broker, rows = cluster
    got = sql(broker, "SELECT k, t FROM dm CROSS JOIN UNNEST(MV_TO_ARRAY(tags)) AS u(t) WHERE k <> 'k1'")
    want = oracle(rows, "SELECT k, unnest(VALUES_OF(tags)) FROM RAW WHERE k <> 'k1'")
    assert counted(got) == counted(want)


def test_unnest_of_a_multi_value_column_on_the_broker(cluster: tuple[StrataProcess, Path]) -> None:
    """A subquery's ORDER BY plans the UNNEST on the broker: a row with no value still gives one
    null row (Druid's qaUnnest/mv_sql_order_by.02.std.iq, line 695: 17 rows from 15 values)."""
    broker, rows = cluster
    got = sql(broker, "SELECT t FROM (SELECT t FROM dm, UNNEST(MV_TO_ARRAY(tags)) AS u(t) ORDER BY t)")
    want = oracle(rows, "SELECT unnest(VALUES_OF(tags)) FROM RAW")
    assert counted(got) == counted(want)


def test_unnest_of_a_renamed_column_of_a_subquery(cluster: tuple[StrataProcess, Path]) -> None:
    """Druid's qaUnnest/mv_sql_col_general.all.iq, line 536: the name a subquery gives reads its column."""
    broker, rows = cluster
    got = sql(
        broker, "SELECT t FROM (SELECT tags AS renamed FROM dm) s, UNNEST(MV_TO_ARRAY(renamed)) AS u(t)"
    )
    want = oracle(rows, "SELECT unnest(VALUES_OF(tags)) FROM RAW")
    assert counted(got) == counted(want)


def test_unnest_of_an_array_grouped_and_filtered(cluster: tuple[StrataProcess, Path]) -> None:
    broker, rows = cluster
    statement = "SELECT t, COUNT(*) FROM dm, UNNEST(nums) AS u(t) WHERE t > 1 GROUP BY t ORDER BY t"
    got = sql(broker, statement)
    want = oracle(
        rows, "SELECT t, count(*) FROM (SELECT unnest(nums) AS t FROM RAW) WHERE t > 1 GROUP BY t ORDER BY t"
    )
    assert got == [list(r) for r in want]
    plan = sql(broker, f"EXPLAIN PLAN FOR {statement}")[0][0]
    assert '"type":"unnest"' in plan  # pushed down to the data nodes, as Druid plans it


def test_unnest_refuses_a_string(cluster: tuple[StrataProcess, Path]) -> None:
    broker, _ = cluster
    assert "Cannot apply 'UNNEST'" in refused(broker, "SELECT t FROM dm, UNNEST(tags) AS u(t)")


def test_group_by_a_multi_value_column_counts_each_value(cluster: tuple[StrataProcess, Path]) -> None:
    broker, rows = cluster
    got = sql(broker, "SELECT tags, COUNT(*) FROM dm WHERE tags = 'a' OR tags = 'd' GROUP BY tags")
    want = oracle(
        rows,
        "SELECT v, count(*) FROM (SELECT unnest(VALUES_OF(tags)) AS v FROM RAW "
        "WHERE list_contains(tags, 'a') OR list_contains(tags, 'd')) GROUP BY v",
    )
    assert counted(got) == counted(want)


def test_multi_value_functions(cluster: tuple[StrataProcess, Path]) -> None:
    broker, rows = cluster
    got = sql(broker, "SELECT MV_FILTER_ONLY(tags, ARRAY['a', 'c']) AS f, COUNT(*) FROM dm GROUP BY 1")
    want = oracle(
        rows,
        "SELECT v, count(*) FROM (SELECT unnest(CASE WHEN len(l) > 0 THEN l ELSE [NULL] END) AS v FROM "
        "(SELECT list_filter(tags, lambda x: x IN ('a', 'c')) AS l FROM RAW)) GROUP BY v",
    )
    assert counted(got) == counted(want)
    lengths = sql(
        broker, "SELECT n, MV_LENGTH(tags), MV_CONTAINS(tags, 'b') FROM dm WHERE k = 'k0' ORDER BY __time"
    )
    want = oracle(
        rows,
        "SELECT n, len(tags), coalesce(list_contains(tags, 'b'), false) FROM RAW WHERE k = 'k0' ORDER BY ts",
    )
    assert [r[0] for r in lengths] == [r[0] for r in want]
    assert [r[2] for r in lengths] == [r[2] for r in want]


def test_arrays_group_whole_and_array_functions(cluster: tuple[StrataProcess, Path]) -> None:
    broker, rows = cluster
    got = sql(broker, "SELECT nums, COUNT(*) FROM dm GROUP BY nums")
    assert counted(got) == counted(oracle(rows, "SELECT nums, count(*) FROM RAW GROUP BY nums"))
    got = sql(broker, "SELECT COUNT(*) FROM dm WHERE ARRAY_CONTAINS(nums, 2)")
    assert got[0][0] == oracle(rows, "SELECT count(*) FROM RAW WHERE list_contains(nums, 2)")[0][0]
    got = sql(broker, "SELECT ARRAY_LENGTH(nums), ARRAY_OFFSET(nums, 0) FROM dm WHERE n < 6 ORDER BY __time")
    want = oracle(rows, "SELECT len(nums), nums[1] FROM RAW WHERE n < 6 ORDER BY ts")
    assert [list(r) for r in want] == got


def test_json_functions_over_a_nested_column(cluster: tuple[StrataProcess, Path]) -> None:
    broker, rows = cluster
    got = sql(
        broker,
        "SELECT JSON_VALUE(doc, '$.b.c'), SUM(JSON_VALUE(doc, '$.a' RETURNING BIGINT)) FROM dm "
        "WHERE JSON_VALUE(doc, '$.a' RETURNING BIGINT) > 3 GROUP BY 1",
    )
    want = oracle(
        rows,
        "SELECT doc->>'$.b.c', sum(CAST(doc->>'$.a' AS BIGINT)) FROM RAW "
        "WHERE CAST(doc->>'$.a' AS BIGINT) > 3 GROUP BY 1",
    )
    assert counted(got) == counted(want)
    got = sql(broker, "SELECT JSON_QUERY(doc, '$.l'), JSON_KEYS(doc, '$') FROM dm WHERE n = 5")
    assert got == [[[5, 6], ["a", "b", "l"]]]


def test_catalog_reports_druid_types(cluster: tuple[StrataProcess, Path]) -> None:
    broker, _ = cluster
    got = sql(broker, "SELECT COLUMN_NAME, DATA_TYPE FROM INFORMATION_SCHEMA.COLUMNS WHERE TABLE_NAME = 'dm'")
    assert dict((r[0], r[1]) for r in got) == {
        "__time": "TIMESTAMP", "k": "VARCHAR", "n": "BIGINT", "tags": "VARCHAR", "nums": "ARRAY",
        "doc": "COMPLEX<json>",
    }  # fmt: skip


def test_array_agg_and_string_agg_keep_druid_forms_and_limits(cluster: tuple[StrataProcess, Path]) -> None:
    broker, rows = cluster
    got = sql(broker, "SELECT STRING_AGG(__time, ',') FROM dm WHERE n < 2")
    times = oracle(rows, "SELECT epoch_ms(CAST(ts AS TIMESTAMP)) FROM RAW WHERE n < 2 ORDER BY ts")
    assert sorted(got[0][0].split(",")) == sorted(str(t) for (t,) in times)  # epoch milliseconds
    got = sql(broker, "SELECT ARRAY_AGG(DISTINCT k) FROM dm")
    assert got == [[["k0", "k1", "k2"]]]
    # 24 rows of 9 bytes each pass 100 bytes: Druid refuses, so does Strata
    assert "Exceeded memory usage" in refused(broker, "SELECT ARRAY_AGG(n, 100) FROM dm")
    assert "Exceeded memory usage" in refused(broker, "SELECT STRING_AGG(k, ',', 50) FROM dm")


def test_earliest_and_latest_of_an_array(cluster: tuple[StrataProcess, Path]) -> None:
    # no native first/last aggregator takes arrays: the broker computes them (Druid answers them)
    broker, rows = cluster
    got = sql(
        broker,
        "SELECT k, EARLIEST(nums), LATEST(nums) FROM dm WHERE ARRAY_LENGTH(nums) > 0 GROUP BY k ORDER BY k",
    )
    want = oracle(
        rows,
        "SELECT k, arg_min(nums, CAST(ts AS TIMESTAMP)), arg_max(nums, CAST(ts AS TIMESTAMP)) FROM RAW"
        " WHERE len(nums) > 0 GROUP BY k ORDER BY k",
    )
    assert got == [list(r) for r in want]


def test_arrays_answer_as_json_text_by_default(cluster: tuple[StrataProcess, Path]) -> None:
    broker, _ = cluster
    resp = httpx.post(
        f"{broker.url}/druid/v2/sql/", json={"query": "SELECT nums FROM dm WHERE n = 0"}, timeout=60
    )
    assert resp.json() == [{"nums": "[1,2]"}]  # sqlStringifyArrays, true by default


def test_order_by_an_array_puts_nulls_first(cluster: tuple[StrataProcess, Path]) -> None:
    broker, rows = cluster
    got = sql(broker, "SELECT nums, COUNT(*) FROM dm GROUP BY nums ORDER BY nums")
    want = oracle(rows, "SELECT nums, count(*) FROM RAW GROUP BY nums")

    def druid_order(value: list[Any] | None) -> tuple[Any, ...]:  # arrays.md: null first, then by element
        return (0,) if value is None else (1, *[(0,) if v is None else (1, v) for v in value])

    assert got == [list(r) for r in sorted(want, key=lambda r: druid_order(r[0]))]
    descending = sql(broker, "SELECT nums, COUNT(*) FROM dm GROUP BY nums ORDER BY nums DESC")
    assert descending == got[::-1]
    every = sorted((r[0] for r in oracle(rows, "SELECT nums FROM RAW")), key=druid_order)
    scanned = "(SELECT nums FROM dm LIMIT 1000)"  # a subquery of its own: sorted above its scan
    assert [r[0] for r in sql(broker, f"SELECT nums AS c FROM {scanned} ORDER BY c")] == every
    assert [r[0] for r in sql(broker, f"SELECT nums FROM {scanned} ORDER BY 1 DESC")] == every[::-1]
    # the table's own scan: Druid's planner refuses to sort it by a non-time column
    assert "requires ordering a table by non-time column" in refused(
        broker, "SELECT nums AS c FROM dm ORDER BY c"
    )
    for bound in ([1, None], [None, 1], [2]):  # comparisons order arrays the same way
        literal = f"ARRAY[{', '.join('NULL' if v is None else str(v) for v in bound)}]"
        got = sql(broker, f"SELECT COUNT(*) FROM dm WHERE nums >= {literal}")
        assert got == [[sum(v is not None and druid_order(v) >= druid_order(bound) for v in every)]]


def test_arrays_and_nested_values_refused_where_druid_refuses(cluster: tuple[StrataProcess, Path]) -> None:
    broker, _ = cluster  # Druid joins on no ARRAY or COMPLEX<json> key, and an array is no instant
    for c in ("nums", "doc"):
        assert "Cannot join" in refused(broker, f"SELECT n FROM dm WHERE {c} IN (SELECT {c} FROM dm)")
        assert "Cannot apply 'MILLIS_TO_TIMESTAMP'" in refused(
            broker, f"SELECT MILLIS_TO_TIMESTAMP({c}) FROM dm"
        )
