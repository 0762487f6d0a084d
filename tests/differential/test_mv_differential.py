"""CI's share of the differential test over multi-value strings, arrays and nested JSON: generated
native queries and SQL on three segmentations of tests.differential.mv_data's rows, through the
historical and brokers without cache, with LRU (cold, warm, per-segment) and on memcached (cold,
then per-segment), each compared with DuckDB over the same rows held apart.
`python -m tests.differential.mv_runner --n 2000 --sql 1000` runs thousands."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from strata.cli.local_servers import MemcachedServer
from tests.differential.mv_data import druid_values, generate_rows
from tests.differential.mv_generator import exploded, oracle_connection
from tests.differential.mv_runner import Setup, mv_cluster, run_native, run_statements

pytestmark = pytest.mark.integration

CI_QUERIES = 40  # x 3 datasources x 8 targets = 960 answers checked
CI_STATEMENTS = 40  # x 3 datasources x 3 targets = 360


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory, memcached_server: MemcachedServer) -> Iterator[Setup]:
    root: Path = tmp_path_factory.mktemp("mv-differential")
    with mv_cluster(root, f"127.0.0.1:{memcached_server.port}") as running:
        yield running


def test_generated_native_queries_match_the_oracle(setup: Setup) -> None:
    outcome = run_native(CI_QUERIES, 20261129, setup)
    assert sum(outcome.ran.values()) >= CI_QUERIES * 3 * 5
    assert not outcome.differed, outcome.summary() + "\n" + "\n".join(outcome.failures)


def test_generated_sql_matches_duckdb(setup: Setup) -> None:
    outcome = run_statements(CI_STATEMENTS, 20261129, setup)
    assert sum(outcome.ran.values()) == CI_STATEMENTS * 3 * 3
    assert not outcome.differed, outcome.summary() + "\n" + "\n".join(outcome.failures)


def test_the_oracle_reads_rows_as_druid_documents() -> None:
    """Worked by hand from multi-value-dimensions.md, so the oracle itself can fail."""
    assert druid_values(["b", "a", "b"], distinct=False) == ["a", "b", "b"]
    assert druid_values(["b", "a", "b"], distinct=True) == ["a", "b"]
    assert druid_values([], distinct=False) == druid_values(None, distinct=False) == [None]
    assert druid_values([None], distinct=False) == [None]
    assert druid_values(["a", None], distinct=False) == [None, "a"]
    assert druid_values("a", distinct=False) == ["a"]
    conn = oracle_connection(generate_rows(n=0))
    conn.execute("INSERT INTO rows_in (ms, tags) VALUES (1, ['t1', 't2', 't3']), (2, ['t3', 't4', 't5']), "
                 "(3, ['t5', 't6', 't7']), (4, [NULL])")  # fmt: skip
    # the documented groupBy: every value of the matching rows, the empty row under null
    grouped = conn.execute(f"SELECT g, count(*) FROM {exploded([('g', 'tags', True)])} GROUP BY 1").fetchall()
    assert dict(grouped) == {"t1": 1, "t2": 1, "t3": 2, "t4": 1, "t5": 2, "t6": 1, "t7": 1, None: 1}
