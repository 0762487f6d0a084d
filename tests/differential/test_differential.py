"""CI's share of the differential test: a fixed-seed batch of generated native queries over three
segmentations of the wikipedia sample, through a broker without cache, with LRU (cold and warm)
and on memcached and hybrid (cold, then warm), and directly on the historical, each compared with the oracle.
`python -m tests.differential --n 5000` runs thousands. Generated SQL goes through the same brokers
against DuckDB answering the same question (tests.differential.sql_runner)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from strata.cli.local_servers import MemcachedServer
from tests.differential.oracle import DimensionOrder, Gran, Oracle, Spec, utc_text
from tests.differential.runner import ingest_all, nodes, raw_connection, run
from tests.differential.sql_runner import run_sql

pytestmark = pytest.mark.integration

CI_QUERIES = 120  # x 3 datasources x 5 targets = 1,800 answers checked


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory, wikipedia_sample: Path, wikipedia_index_spec: Path,
          memcached_server: MemcachedServer) -> Iterator[tuple[dict, dict, Path]]:  # fmt: skip
    root = tmp_path_factory.mktemp("differential")
    ranges = ingest_all(root, wikipedia_sample, wikipedia_index_spec)
    with nodes(root, f"127.0.0.1:{memcached_server.port}") as targets:
        yield targets, ranges, wikipedia_sample


def test_generated_queries_match_the_oracle(setup: tuple[dict, dict, Path]) -> None:
    targets, ranges, sample = setup
    outcome = run(CI_QUERIES, 20261125, targets, raw_connection(sample), ranges)
    assert sum(outcome.ran.values()) >= CI_QUERIES * 3 * 5
    assert not outcome.differed, outcome.summary() + "\n" + "\n".join(outcome.failures)


CI_STATEMENTS = 100  # generated SQL x 3 datasources x 3 targets = 900 answers checked


def test_generated_sql_matches_duckdb(setup: tuple[dict, dict, Path]) -> None:
    """`python -m tests.differential.sql_runner --n 2000` runs thousands."""
    targets, _, sample = setup
    outcome = run_sql(CI_STATEMENTS, 20261125, targets, raw_connection(sample))
    assert sum(outcome.ran.values()) == CI_STATEMENTS * 3 * 3
    assert not outcome.differed, outcome.summary() + "\n" + "\n".join(outcome.failures)


def test_the_oracle_on_hand_computed_cases(wikipedia_sample: Path) -> None:
    """Small answers worked out by hand from the rule, so the oracle itself can fail."""
    conn = raw_connection(wikipedia_sample)
    (n11,) = conn.execute(  # type: ignore[misc]
        "SELECT count(*) FROM raw WHERE ms >= 1442055600000 AND ms < 1442059200000"
    ).fetchone()
    hour = Gran("hour", step_ms=3_600_000)
    spec = Spec({}, "timeseries", [(1442055600000, 1442059200000), (1442057400000, 1442058300000)], hour,
                "TRUE", [], [], [])  # fmt: skip
    from tests.differential.generator import AGGS

    spec.aggs = [AGGS[0]]
    # one segment holding the whole day: the 11:00 hour once (overlap condensed), no other bucket
    day_segment = [(1442018818771, 1442102399200)]
    assert Oracle(conn, day_segment).answer(spec) == [
        {"timestamp": "2015-09-12T11:00:00.000Z", "result": {"c": n11}}
    ]
    # a segment with no data in the interval contributes no bucket; cursor start clips to its minTime
    spec.gran = Gran("all")
    late = [(1442056000000, 1442102399200)]  # minTime 11:06:40
    assert Oracle(conn, late).answer(spec)[0]["timestamp"] == "2015-09-12T11:06:40.000Z"
    # no cursor at all (the interval ends before the segment's first row): Druid's merge still
    # answers one row for `all`, count 0 and null elsewhere, at the first interval's start
    before = Spec({}, "timeseries", [(1442014500000, 1442017500000), (1442014800000, 1442017200000)],
                  Gran("all"), "TRUE", [], [], [])  # fmt: skip
    before.aggs = [AGGS[0]]
    assert Oracle(conn, day_segment).answer(before) == [
        {"timestamp": "2015-09-11T23:35:00.000Z", "result": {"c": 0}}
    ]


def test_the_oracle_on_the_corners_of_issue_30(wikipedia_sample: Path) -> None:
    """Granularity `none`, grand totals over nothing and topN dimension orderings, by hand."""
    from tests.differential.generator import AGGS, NONE

    conn = raw_connection(wikipedia_sample)
    day_segment = [(1442018818771, 1442102399200)]
    (first,) = conn.execute("SELECT min(ms) FROM raw").fetchone()  # type: ignore[misc]
    (at_first,) = conn.execute(f"SELECT count(*) FROM raw WHERE ms = {first}").fetchone()  # type: ignore[misc]
    # every millisecond from the segment's first row to the interval's end; nothing before the first row
    spec = Spec({}, "timeseries", [(first - 3, first + 4)], NONE, "TRUE", [AGGS[0]], [], [])
    answer = Oracle(conn, day_segment).answer(spec)
    assert [r["timestamp"] for r in answer] == [utc_text(first + i) for i in range(4)]
    assert answer[0]["result"] == {"c": at_first}
    # hours of data at `none` are past the documented 1,000,000 buckets: a 400
    spec.intervals = [(first, first + 2 * 3_600_000)]
    assert Oracle(conn, day_segment).answer(spec) == {"status": 400, "error": "Resource limit exceeded"}
    # a grand total over no bucket: every aggregator null, count included
    nothing = Spec({}, "timeseries", [(first, first + 3_600_000)], Gran("hour", step_ms=3_600_000), "FALSE",
                   [AGGS[0], AGGS[1]], [], [], skip_empty=True, grand_total=True)  # fmt: skip
    assert Oracle(conn, day_segment).answer(nothing) == [
        {"timestamp": None, "result": {"c": None, "added": None}}
    ]
    # topN dimension orderings: as strings, unparseable ones before numbers for `numeric`, reversed when inverted
    assert DimensionOrder("lexicographic").compare("15063", "1555") < 0
    assert (
        DimensionOrder("numeric").compare("1555", "15063") < 0 < DimensionOrder("numeric").compare("9", "abc")
    )
    assert DimensionOrder("lexicographic", inverted=True).compare(None, "a") > 0
