"""The unnest, join, union and inline dataSources through a real broker and two historicals, with the
broker's per-segment cache on: answers against DuckDB over the raw rows, the same when the cache
answers (a repeat) and when it is not used, and two queries differing only in their datasource
never sharing a cached partial."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from strata.ingestion.api import ingest
from tests.cluster.cluster_kit import Nodes, cluster, query, raw, synthetic_spec, wait_settled, write_rows

pytestmark = pytest.mark.integration

DAYS = ["2024-03-01", "2024-03-02", "2024-03-03"]
INTERVAL = "2024-03-01/2024-03-04"
TAGS = [["a", "b"], ["b"], [], None, ["c", "a", None], ["d"]]
ARRS = [[1, 2], [], None, [3], [2, 2, None]]


def _rows() -> list[dict[str, Any]]:
    return [
        {"ts": f"{DAYS[i % 3]}T{i % 24:02d}:00:00Z", "k": f"k{i % 4}", "n": i,
         "tags": TAGS[i % len(TAGS)], "arr": ARRS[i % len(ARRS)]}
        for i in range(60)
    ]  # fmt: skip


DIMENSIONS = ["k", {"name": "n", "type": "long"}, {"name": "tags", "type": "string", "multiValueHandling": "ARRAY"},
              {"name": "arr", "type": "auto"}]  # fmt: skip


@pytest.fixture(scope="module")
def nodes(tmp_path_factory: pytest.TempPathFactory, zk_hosts: str) -> Iterator[tuple[Nodes, Path]]:
    root = tmp_path_factory.mktemp("datasources")
    rows = write_rows(root / "rows" / "rows.json", _rows())
    for name in ("dm", "dm2"):
        ingest(
            synthetic_spec(name, rows, "day", dimensions=DIMENSIONS),
            deep_storage=root / "deep",
            metadata=root / "meta.db",
            engine="local",
        )
    with cluster(root, zk_hosts, "/strata-datasources", broker_args=["--cache", "lru"]) as running:
        wait_settled(running.broker, root / "meta.db", running.historicals, 60)
        yield running, rows


def ask(nodes: Nodes, body: dict[str, Any]) -> list[Any]:
    """The answer, checked to be the same from the data nodes, from the cache, and without it."""
    first = query(nodes.broker, body)
    assert first.status_code == 200, first.text
    again = query(nodes.broker, body)
    uncached = query(nodes.broker, {**body, "context": {"useCache": False, "populateCache": False}})
    assert again.json() == first.json() == uncached.json()
    answer: list[Any] = first.json()
    return answer


def group_counts(answer: list[Any], *dims: str) -> dict[tuple[Any, ...], int]:
    return {tuple(json.dumps(r["event"][d]) for d in dims): r["event"]["c"] for r in answer}


def unnest(column: str, name: str, unnest_filter: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"type": "unnest", "base": "dm", "unnestFilter": unnest_filter,
            "virtualColumn": {"type": "expression", "name": name, "expression": f'"{column}"'}}  # fmt: skip


COUNT = [{"type": "count", "name": "c"}]


def test_unnest_of_a_multi_value_column_gives_one_row_per_value(nodes: tuple[Nodes, Path]) -> None:
    running, rows = nodes
    body = {"queryType": "groupBy", "dataSource": unnest("tags", "t"), "intervals": [INTERVAL],
            "granularity": "all", "dimensions": ["t"], "aggregations": COUNT,
            "filter": {"type": "in", "dimension": "k", "values": ["k0", "k1"]}}  # fmt: skip
    got = group_counts(ask(running, body), "t")
    # a row with no value is one null value
    want = raw(
        "SELECT v, count(*) FROM (SELECT unnest(CASE WHEN len(tags) > 0 THEN tags ELSE [NULL] END) AS v "
        "FROM RAW WHERE k IN ('k0', 'k1')) GROUP BY v",
        rows,
    )
    assert got == {(json.dumps(v),): n for v, n in want}


def test_unnest_of_an_array_drops_null_and_empty_arrays(nodes: tuple[Nodes, Path]) -> None:
    running, rows = nodes
    flt = {"type": "range", "column": "e", "matchValueType": "LONG", "lower": 2}
    body = {"queryType": "timeseries", "dataSource": unnest("arr", "e", flt), "intervals": [INTERVAL],
            "granularity": "day", "aggregations": [*COUNT, {"type": "longSum", "name": "s", "fieldName": "e"}]}  # fmt: skip
    got = {r["timestamp"][:10]: (r["result"]["c"], r["result"]["s"]) for r in ask(running, body)}
    want = raw(
        "SELECT strftime(CAST(ts AS TIMESTAMP), '%Y-%m-%d'), count(*), sum(e) FROM "
        "(SELECT ts, unnest(arr) AS e FROM RAW) WHERE e >= 2 GROUP BY 1",
        rows,
    )
    assert got == {d: (c, s) for d, c, s in want}
    # the same datasource without its filter is a different partial: never the cached one
    body["dataSource"] = unnest("arr", "e")
    everything = raw("SELECT count(*) FROM (SELECT unnest(arr) FROM RAW)", rows)[0][0]
    assert sum(r["result"]["c"] for r in ask(running, body)) == everything


def test_join_with_inline_rows(nodes: tuple[Nodes, Path]) -> None:
    running, rows = nodes
    right = {"type": "inline", "columnNames": ["key", "label"], "rows": [["k0", "zero"], ["k2", "two"]]}
    for join_type in ("INNER", "LEFT"):
        source = {"type": "join", "left": "dm", "right": right, "rightPrefix": "j.",
                  "condition": 'k == "j.key"', "joinType": join_type}  # fmt: skip
        body = {"queryType": "groupBy", "dataSource": source, "intervals": [INTERVAL], "granularity": "all",
                "dimensions": ["k", "j.label"], "aggregations": COUNT}  # fmt: skip
        got = group_counts(ask(running, body), "k", "j.label")
        side = "JOIN" if join_type == "INNER" else "LEFT JOIN"
        want = raw(
            f"SELECT k, label, count(*) FROM RAW {side} (VALUES ('k0', 'zero'), ('k2', 'two')) AS r(key, label) "
            "ON k = key GROUP BY 1, 2",
            rows,
        )
        assert got == {(json.dumps(k), json.dumps(label)): n for k, label, n in want}


def test_join_with_a_query_runs_the_query_first(nodes: tuple[Nodes, Path]) -> None:
    running, rows = nodes
    inner = {"queryType": "groupBy", "dataSource": "dm2", "intervals": [INTERVAL], "granularity": "all",
             "dimensions": ["k"], "aggregations": [{"type": "longMax", "name": "top", "fieldName": "n"}]}  # fmt: skip
    source = {"type": "join", "left": "dm", "right": {"type": "query", "query": inner}, "rightPrefix": "r.",
              "condition": 'k == "r.k"', "joinType": "INNER"}  # fmt: skip
    body = {"queryType": "timeseries", "dataSource": source, "intervals": [INTERVAL], "granularity": "all",
            "aggregations": [{"type": "longSum", "name": "s", "fieldName": "r.top"}]}  # fmt: skip
    got = ask(running, body)[0]["result"]["s"]
    want = raw(
        "SELECT sum(top) FROM RAW JOIN (SELECT k AS key, max(n) AS top FROM RAW GROUP BY 1) ON k = key", rows
    )
    assert got == want[0][0]


def test_union_reads_every_table(nodes: tuple[Nodes, Path]) -> None:
    running, rows = nodes
    body = {"queryType": "groupBy", "dataSource": {"type": "union", "dataSources": ["dm", "dm2"]},
            "intervals": [INTERVAL], "granularity": "all", "dimensions": ["k"],
            "aggregations": [{"type": "longSum", "name": "c", "fieldName": "n"}]}  # fmt: skip
    got = group_counts(ask(running, body), "k")
    want = raw("SELECT k, 2 * sum(n) FROM RAW GROUP BY 1", rows)
    assert got == {(json.dumps(k),): n for k, n in want}


def test_inline_rows_are_answered_by_the_broker(nodes: tuple[Nodes, Path]) -> None:
    running, _ = nodes
    source = {"type": "inline", "columnNames": ["k", "v"], "columnTypes": ["STRING", "LONG"],
              "rows": [["x", 1], ["y", 2], ["x", 5]]}  # fmt: skip
    body = {"queryType": "groupBy", "dataSource": source, "intervals": ["1970-01-01/2100-01-01"],
            "granularity": "all", "dimensions": ["k"], "aggregations": [{"type": "longSum", "name": "c", "fieldName": "v"}]}  # fmt: skip
    assert group_counts(ask(running, body), "k") == {('"x"',): 6, ('"y"',): 2}
